"""The record of every key a run deleted: written beside the summary by a
deleting round, listed by `gc runs --deleted`, found by `gc explain` for a
key that is gone, and deleted with its run."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from epochgc.errors import RetriesExhaustedError
from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.deletion_record import deleted_keys, find_deletion
from epochgc.gc.run_report import delete_expired_runs
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key, parse_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.support.cli import run_cli
from tests.support.config_files import write_gc_config
from tests.support.l0_world import l0_keys, report_safe_epoch
from tests.support.moto_seed import seed_objects
from tests.support.wrapping import StoreWrapper

ROOT = "epochgc"


def seed(store: S3ObjectStore, bucket: str, m: int) -> list[str]:
    """A controller at epoch 10, one partition reporting ``M(p) = m``, and
    40 L0 objects over 2 shards and epochs 1..10 (4 per shard and epoch)."""
    controller = Controller(store, ROOT)
    controller.create_topic("orders", 1)
    while controller.current_epoch() < 10:
        controller.tick()
    report_safe_epoch(store, ROOT, "orders", 1, m)
    keys = l0_keys(ROOT, 2, range(1, 11), 2)
    seed_objects(bucket, keys)
    return keys


def collect(store: S3ObjectStore, *, record: bool = True) -> str:
    stats = RequestStats()
    stats.attach(store.client)
    settings = CollectSettings(
        min_object_age=timedelta(0), max_delete_fraction=1.0, record_deletions=record
    )
    return collect_once(store, stats, ROOT, settings).summary.run_id


def test_a_deleting_round_records_exactly_the_keys_it_deleted(
    store: S3ObjectStore, bucket: str
) -> None:
    keys = seed(store, bucket, m=6)
    run_id = collect(store)
    rows = list(deleted_keys(store, ROOT, run_id))
    expected = {k for k in keys if parse_l0_key(k, ROOT).epoch <= 6}  # type: ignore[union-attr]
    assert {r.key for r in rows} == expected and len(rows) == len(expected) == 24
    for row in rows:
        parsed = parse_l0_key(row.key, ROOT)
        assert parsed is not None
        assert (row.epoch, row.shard, row.m, row.size) == (parsed.epoch, parsed.shard, 6, 1)
    left = {o.key for o in store.list_objects(f"{ROOT}/l0/")}
    assert left == set(keys) - expected


def test_explain_names_the_run_that_deleted_a_key_and_runs_lists_it(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    keys = seed(store, bucket, m=3)
    first = collect(store)  # deletes epochs 1..3
    report_safe_epoch(store, ROOT, "orders", 1, 6)
    second = collect(store)  # then 4..6
    assert first != second
    config = write_gc_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket)
    gone = next(k for k in keys if parse_l0_key(k, ROOT).epoch == 5)  # type: ignore[union-attr]
    done = run_cli("gc", "explain", gone, "--config", str(config), "--json")
    assert done.returncode == 0, done.stderr
    (reason,) = [r for r in json.loads(done.stdout)["reasons"] if r["code"] == "deleted"]
    assert f"deleted by run {second}" in reason["text"] and "at M 6" in reason["text"]
    assert "epoch 5" in reason["text"] and "in the run that ended 20" in reason["text"]
    first_line = run_cli("gc", "explain", gone, "--config", str(config)).stdout.splitlines()[0]
    assert first_line.startswith(f"{gone}: already deleted by run {second} "), first_line

    never = encode_l0_key(ROOT, 0, 2, str(uuid.uuid4()))
    missing = json.loads(run_cli("gc", "explain", never, "--config", str(config), "--json").stdout)
    (reason,) = [r for r in missing["reasons"] if r["code"] == "missing"]
    assert "no kept deletion record has it" in reason["text"]

    listed = run_cli("gc", "runs", "--deleted", first, "--config", str(config), "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {r["epoch"] for r in rows} == {1, 2, 3} and len(rows) == 12
    assert {r["m"] for r in rows} == {3} and {r["run_id"] for r in rows} == {first}
    human = run_cli("gc", "runs", "--deleted", first, "--config", str(config))
    assert human.returncode == 0 and len(human.stdout.splitlines()) == 13  # header + 12
    unknown = run_cli(
        "gc", "runs", "--deleted", "20260101T000000Z-00000000", "--config", str(config)
    )
    assert unknown.returncode != 0 and "no run" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_no_record_when_turned_off_and_a_record_goes_with_its_run(
    store: S3ObjectStore, bucket: str
) -> None:
    keys = seed(store, bucket, m=6)
    off = collect(store, record=False)
    assert list(deleted_keys(store, ROOT, off)) == []
    assert find_deletion(store, ROOT, keys[0]).found is None
    assert not list(store.list_objects(f"{ROOT}/gc/runs/{off}/deleted/"))

    seed_objects(bucket, keys)  # the same keys again: a second round deletes them again
    on = collect(store)
    assert find_deletion(store, ROOT, keys[0]).found is not None
    later = datetime.now(UTC) + timedelta(days=31)
    assert delete_expired_runs(store, ROOT, later, timedelta(days=30)) == 2
    assert not list(store.list_objects(f"{ROOT}/gc/runs/{on}/"))


class _RecordUploadFails(StoreWrapper):
    """Every PUT of a deletion record part fails as if its retries ran out."""

    def put(self, key: str, body: bytes, **kwargs: object) -> str:
        if "/deleted/" in key:
            raise RetriesExhaustedError(f"injected 503: PutObject {key}", None)
        return str(self._store.put(key, body, **kwargs))


def test_a_record_that_cannot_be_uploaded_still_leaves_a_summary(
    store: S3ObjectStore, bucket: str
) -> None:
    """Issue 39: the deletion record must be exact. A round whose record
    upload failed raised out of the round with no summary at all: its
    deletions were done and nothing in the bucket said so."""
    seed(store, bucket, m=6)
    stats = RequestStats()
    stats.attach(store.client)
    settings = CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0)
    outcome = collect_once(_RecordUploadFails(store), stats, ROOT, settings)  # type: ignore[arg-type]
    summary = outcome.summary
    assert summary.deleted == 24
    assert not summary.success
    assert summary.cause is not None
    assert summary.cause.startswith("deletion record not written: ")
    stored = json.loads(store.get(outcome.summary_key).body)
    assert stored["deleted"] == 24 and stored["cause"] == summary.cause


class _FirstBatchAnswerLost(StoreWrapper):
    """The first DeleteObjects is applied, then fails as if every retry
    had timed out: the keys are gone and the caller cannot know it."""

    def __init__(self, store: S3ObjectStore) -> None:
        super().__init__(store)
        self.lost: list[str] = []

    def delete_batch(self, keys: list[str]) -> object:
        outcome = self._store.delete_batch(keys)
        if not self.lost:
            self.lost = list(keys)
            raise RetriesExhaustedError("injected: DeleteObjects timed out after it landed", None)
        return outcome


def test_a_batch_that_landed_unanswered_is_recorded_once_confirmed(
    store: S3ObjectStore, bucket: str
) -> None:
    """Issue 39 (the deletion record is exact): a DeleteObjects that landed
    but whose retries ran out recorded nothing, though its keys were gone.
    The sweep sends such a batch once more at its end: DeleteObjects
    confirms keys that are already gone, and those are recorded."""
    keys = seed(store, bucket, m=6)
    lossy = _FirstBatchAnswerLost(store)
    stats = RequestStats()
    stats.attach(store.client)
    settings = CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0)
    summary = collect_once(lossy, stats, ROOT, settings).summary  # type: ignore[arg-type]
    assert lossy.lost, "a batch was answered with an error after it landed"
    expected = {k for k in keys if parse_l0_key(k, ROOT).epoch <= 6}  # type: ignore[union-attr]
    recorded = [r.key for r in deleted_keys(store, ROOT, summary.run_id)]
    assert sorted(recorded) == sorted(expected)
    assert (summary.deleted, summary.errors, summary.success) == (24, 0, True)
