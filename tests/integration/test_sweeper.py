"""The shard sweeper on the embedded S3."""

from __future__ import annotations

import gc
import threading
import uuid
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta

import pytest

from epochgc.errors import TransientStorageError
from epochgc.events import EventChannel
from epochgc.gc.eligibility import Verdict
from epochgc.gc.run_report import RunSummary, decode_summary, new_run_id, write_summary
from epochgc.gc.sweeper import DeleteBatchDone, ObjectsPlanned, Sweeper, SweepPolicy
from epochgc.storage.keys import encode_l0_key, parse_l0_key
from epochgc.storage.object_store import DeleteOutcome, Throttled
from epochgc.storage.retry import RetryPolicy
from epochgc.storage.s3 import S3ObjectStore
from tests.support.faults import PerKeyErrorClient
from tests.support.moto_seed import seed_objects
from tests.support.synthetic_l0 import SyntheticL0Store

ROOT = "epochgc"
NOW_POLICY = SweepPolicy(min_object_age=timedelta(0), shard_concurrency=4, delete_concurrency=2)


def l0(shard: int, epoch: int) -> str:
    return encode_l0_key(ROOT, shard, epoch, str(uuid.uuid4()))


def seed_l0(bucket: str, shards: int, epochs: range, per_epoch: int) -> list[str]:
    keys = [l0(s, e) for s in range(shards) for e in epochs for _ in range(per_epoch)]
    seed_objects(bucket, keys, body=b"0123456789")
    return keys


def remaining(store: S3ObjectStore, prefix: str = "") -> set[str]:
    return {o.key for o in store.list_objects(prefix)}


def now() -> datetime:
    return datetime.now(UTC)


def test_exactly_the_eligible_objects_go(store: S3ObjectStore, bucket: str) -> None:
    keys = seed_l0(bucket, shards=4, epochs=range(1, 11), per_epoch=3)
    junk = [f"{ROOT}/l0/001/junk", f"{ROOT}/l0/002/{5:018d}/not-a-uuid", f"{ROOT}/l0/7/x"]
    outside = [
        f"{ROOT}2/l0/001/{1:018d}/{uuid.uuid4()}",  # a sibling root sharing the prefix
        f"{ROOT}/meta/controller/{1:020d}",
        f"other/l0/001/{1:018d}/{uuid.uuid4()}",
    ]
    seed_objects(bucket, junk + outside)
    result = Sweeper(store, ROOT, NOW_POLICY).sweep(range(4), safe_epoch=5, now=now())
    survivors = remaining(store)
    expected = {k for k in keys if parse_l0_key(k, ROOT).epoch > 5} | set(junk) | set(outside)  # type: ignore[union-attr]
    assert survivors == expected
    assert result.deleted == result.eligible == 4 * 5 * 3
    assert result.bytes_deleted == 60 * 10
    # Seen and counted: shard 2's junk sorts among epoch 5. Shard 1's "junk"
    # sorts after every epoch, past where the sweep stops; shard "7" is not
    # a shard prefix at all. All of them survive.
    assert result.skipped[Verdict.UNPARSEABLE] == 1
    assert result.skipped[Verdict.ABOVE_SAFE_EPOCH] == 4, "one per shard: the sweep stops there"
    assert result.errors == 0


def test_an_object_at_m_plus_one_survives(store: S3ObjectStore, bucket: str) -> None:
    at_m, above = l0(0, 80), l0(0, 81)
    seed_objects(bucket, [at_m, above])
    Sweeper(store, ROOT, NOW_POLICY).sweep([0], safe_epoch=80, now=now())
    assert remaining(store) == {above}


def test_too_young_objects_survive_until_old_enough(store: S3ObjectStore, bucket: str) -> None:
    keys = seed_l0(bucket, shards=1, epochs=range(1, 4), per_epoch=2)
    sweeper = Sweeper(store, ROOT, SweepPolicy(min_object_age=timedelta(hours=1)))
    first = sweeper.sweep([0], safe_epoch=10, now=now())
    assert first.deleted == 0 and first.skipped[Verdict.TOO_YOUNG] == 6
    assert first.youngest_too_young is not None
    second = sweeper.sweep([0], safe_epoch=10, now=now() + timedelta(hours=2))
    assert second.deleted == 6 and remaining(store) == set()
    assert keys


def test_pagination_over_more_than_1000_keys_in_a_shard(store: S3ObjectStore, bucket: str) -> None:
    seed_l0(bucket, shards=1, epochs=range(1, 6), per_epoch=500)  # 2,500 keys
    result = Sweeper(store, ROOT, NOW_POLICY).sweep([0], safe_epoch=4, now=now())
    assert result.deleted == 2000
    assert len(remaining(store)) == 500


def test_dry_run_deletes_nothing_and_streams_the_plan(store: S3ObjectStore, bucket: str) -> None:
    seed_l0(bucket, shards=2, epochs=range(1, 4), per_epoch=600)
    batches: list[int] = []
    planned: list[str] = []

    def plan(event: ObjectsPlanned) -> None:
        batches.append(len(event.objects))
        planned.extend(o.key for o in event.objects)

    sweeper = Sweeper(store, ROOT, NOW_POLICY)
    sweeper.events.subscribe(ObjectsPlanned, plan)
    result = sweeper.sweep(range(2), 2, now(), dry_run=True, plan=True)
    assert result.deleted == 0 and result.eligible == 2400 == len(set(planned))
    assert max(batches) == 1000, "handed over a batch at a time"
    assert {parse_l0_key(k, ROOT).epoch for k in planned} == {1, 2}  # type: ignore[union-attr]
    counted = sweeper.sweep(range(2), 2, now(), dry_run=True)
    assert counted.eligible == 2400
    assert len(planned) == 2400, "a counting sweep publishes no plan"
    assert len(remaining(store)) == 3600


def test_two_sweepers_at_once(store: S3ObjectStore, bucket: str, s3_client) -> None:  # type: ignore[no-untyped-def]
    keys = seed_l0(bucket, shards=4, epochs=range(1, 9), per_epoch=40)
    results = []

    def run() -> None:
        other = S3ObjectStore(s3_client, bucket)
        results.append(Sweeper(other, ROOT, NOW_POLICY).sweep(range(4), 6, now()))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert remaining(store) == {k for k in keys if parse_l0_key(k, ROOT).epoch > 6}  # type: ignore[union-attr]
    assert all(r.errors == 0 for r in results)


def test_a_sweep_killed_midway_is_finished_by_the_next(store: S3ObjectStore, bucket: str) -> None:
    keys = seed_l0(bucket, shards=2, epochs=range(1, 6), per_epoch=600)
    stop = threading.Event()
    sweeper = Sweeper(
        store,
        ROOT,
        SweepPolicy(min_object_age=timedelta(0), shard_concurrency=1, delete_concurrency=1),
    )
    original = store.delete_batch
    calls = {"n": 0}

    def delete_then_die(batch: list[str]):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            stop.set()  # the process is told to stop after this batch
        return original(batch)

    store.delete_batch = delete_then_die  # type: ignore[method-assign]
    first = sweeper.sweep(range(2), 5, now(), stop=stop)
    store.delete_batch = original  # type: ignore[method-assign]
    assert 0 < first.deleted < len(keys)
    second = Sweeper(store, ROOT, NOW_POLICY).sweep(range(2), 5, now())
    assert first.deleted + second.deleted == len(keys)
    assert remaining(store) == set()


def test_persistent_per_key_errors_are_counted_not_fatal(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    keys = seed_l0(bucket, shards=1, epochs=range(1, 3), per_epoch=5)
    denied = set(keys[:2])
    client = PerKeyErrorClient(s3_client, lambda _c, k: "AccessDenied" if k in denied else None)
    store = S3ObjectStore(client, bucket)  # type: ignore[arg-type]
    result = Sweeper(store, ROOT, NOW_POLICY).sweep([0], 5, now())
    assert result.errors == 2 and result.deleted == 8
    assert remaining(store) == denied


def test_slowdown_lowers_the_delete_rate(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    seed_l0(bucket, shards=1, epochs=range(1, 3), per_epoch=5)
    client = PerKeyErrorClient(s3_client, lambda call, _k: "SlowDown" if call == 1 else None)
    events = EventChannel()
    store = S3ObjectStore(
        client,  # type: ignore[arg-type]
        bucket,
        retry_policy=RetryPolicy(max_attempts=4, base_delay_seconds=0.0, max_delay_seconds=0.0),
        events=events,
    )
    sweeper = Sweeper(
        store,
        ROOT,
        SweepPolicy(min_object_age=timedelta(0), rate_limit_keys_per_second=5000),
        events=events,
    )
    result = sweeper.sweep([0], 5, now())
    assert result.deleted == 10 and result.errors == 0
    assert sweeper.rate.throttles == 1
    assert sweeper.rate.rate is not None and sweeper.rate.rate < 5000
    events.publish(Throttled("GetObject"))
    assert sweeper.rate.throttles == 1, "a sweeper listens only while it sweeps"


def test_listing_errors_are_counted(store: S3ObjectStore, bucket: str) -> None:
    seed_l0(bucket, shards=1, epochs=range(1, 3), per_epoch=2)

    def broken(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise TransientStorageError("injected: listing failed")

    store.list_pages = broken  # type: ignore[method-assign]
    result = Sweeper(store, ROOT, NOW_POLICY).sweep([0], 5, now())
    assert result.errors == 1 and result.deleted == 0
    assert "listing shard 0" in result.error_samples[0]


def test_a_sweep_becomes_a_run_summary_in_the_bucket(store: S3ObjectStore, bucket: str) -> None:
    seed_l0(bucket, shards=2, epochs=range(1, 5), per_epoch=3)
    started = now()
    result = Sweeper(store, ROOT, NOW_POLICY).sweep(range(2), 2, started)
    run_id = new_run_id(started)
    summary = RunSummary.of_sweep(
        run_id,
        "local",
        result,
        controller_offset=9,
        started_at=started,
        finished_at=now(),
        dry_run=False,
        requests={"ListObjectsV2": 2, "DeleteObjects": 1},
    )
    key = write_summary(store, ROOT, summary)
    assert key == f"{ROOT}/gc/runs/{run_id}/summary.json"
    stored = decode_summary(store.get(key).body)
    assert (stored.deleted, stored.eligible, stored.skipped["above_safe_epoch"]) == (12, 12, 2)
    assert stored.success and stored.safe_epoch == 2


def test_a_long_sweep_keeps_only_the_batches_in_flight() -> None:
    """Nothing of a sweep grows with its length: not the keys, not the
    futures of batches long done (10^8 keys are 10^5 batches)."""

    def live_futures() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, Future))

    class Probe(SyntheticL0Store):
        futures_at_batch_400: int | None = None

        def delete_batch(self, keys: list[str]) -> DeleteOutcome:
            outcome = super().delete_batch(keys)
            if self.delete_requests == 400:
                # This sweep's own: other tests' leftovers share the process.
                self.futures_at_batch_400 = live_futures() - before
            return outcome

    probe = Probe(
        None,
        ROOT,
        shards=4,
        per_shard=125_000,
        epochs=10,
        size=1,
        last_modified=datetime(2020, 1, 1, tzinfo=UTC),
    )
    gc.collect()
    before = live_futures()
    result = Sweeper(probe, ROOT, NOW_POLICY).sweep(range(4), 10, now())  # type: ignore[arg-type]
    assert result.deleted == 500_000 and probe.delete_requests == 500
    assert probe.futures_at_batch_400 is not None and probe.futures_at_batch_400 < 50


def test_the_deletion_record_lists_only_the_keys_deleteobjects_confirmed(
    s3_client, bucket: str
) -> None:  # type: ignore[no-untyped-def]
    """The record feeds on each DeleteObjects answer: a key S3 refused
    (a per-key error inside the 200) is still in the bucket and must not
    be recorded as deleted (the mutation check's third surviving mutant:
    the whole batch fed to the record)."""
    keys = seed_l0(bucket, shards=1, epochs=range(1, 3), per_epoch=5)
    denied = set(keys[:3])
    client = PerKeyErrorClient(s3_client, lambda _c, k: "AccessDenied" if k in denied else None)
    store = S3ObjectStore(client, bucket)  # type: ignore[arg-type]
    recorded: list[str] = []
    sweeper = Sweeper(store, ROOT, NOW_POLICY)
    sweeper.events.subscribe(
        DeleteBatchDone, lambda event: recorded.extend(i.key for i in event.deleted)
    )
    sweeper.sweep([0], 5, now())
    assert sorted(recorded) == sorted(set(keys) - denied)
    assert remaining(store) == denied


def test_a_record_that_cannot_be_written_fails_the_sweep(store: S3ObjectStore, bucket: str) -> None:
    """A plan or a deletion record is a subscriber whose failure must fail
    the run (a run that deleted without its record would say nothing of
    it): its error reaches the sweep's caller through the channel."""
    seed_l0(bucket, shards=1, epochs=range(1, 3), per_epoch=2)

    def full_disk(_event: object) -> None:
        raise OSError("No space left on device")

    planning = Sweeper(store, ROOT, NOW_POLICY)
    planning.events.subscribe(ObjectsPlanned, full_disk)
    with pytest.raises(OSError, match="No space left"):
        planning.sweep([0], 5, now(), dry_run=True, plan=True)
    deleting = Sweeper(store, ROOT, NOW_POLICY)
    deleting.events.subscribe(DeleteBatchDone, full_disk)
    with pytest.raises(OSError, match="No space left"):
        deleting.sweep([0], 5, now())
