"""One collection round (library and CLI) on the embedded S3."""

from __future__ import annotations

import dataclasses
import io
import json
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from epochgc.errors import EpochGCError, SafetyBlockedError
from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.collector import Collector, CollectorState, RoundOutcome
from epochgc.gc.control import pause
from epochgc.gc.run_report import list_runs
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key, parse_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.support.cli import fatal_lines, run_cli
from tests.support.config_files import write_gc_config
from tests.support.l0_world import l0_keys, report_safe_epoch
from tests.support.moto_seed import seed_objects
from tests.support.pausing import PauseAfterFirstControlRead
from tests.support.peak_rss import peak_rss_growth
from tests.support.servers import pushgateway
from tests.support.synthetic_l0 import SyntheticL0Store

ROOT = "epochgc"


def settings(max_fraction: float = 0.9) -> CollectSettings:
    return CollectSettings(min_object_age=timedelta(0), max_delete_fraction=max_fraction)


@pytest.fixture
def world(store: S3ObjectStore, bucket: str) -> list[str]:
    """M = 6: topic at revision 3, controller at 10, its partition reports 6;
    200 L0 objects over 4 shards and epochs 1..10."""
    controller = Controller(store, ROOT)
    controller.tick()
    controller.tick()
    controller.create_topic("orders", 1)
    while controller.current_epoch() < 10:
        controller.tick()
    report_safe_epoch(store, ROOT, "orders", 3, 6)
    keys = l0_keys(ROOT, 4, range(1, 11), 5)
    seed_objects(bucket, keys)
    return keys


def l0_left(store: S3ObjectStore) -> set[int]:
    return {parse_l0_key(o.key, ROOT).epoch for o in store.list_objects(f"{ROOT}/l0/")}  # type: ignore[union-attr]


def l0_count(store: S3ObjectStore) -> int:
    return sum(1 for _ in store.list_objects(f"{ROOT}/l0/"))


def stats_for(store: S3ObjectStore) -> RequestStats:
    stats = RequestStats()
    stats.attach(store.client)
    return stats


def test_a_round_deletes_exactly_what_m_allows(store: S3ObjectStore, world: list[str]) -> None:
    outcome = collect_once(store, stats_for(store), ROOT, settings())
    s = outcome.summary
    assert (s.safe_epoch, s.controller_offset) == (6, 10)
    assert (s.listed, s.eligible, s.deleted) == (200, 120, 120)
    assert s.skipped["above_safe_epoch"] == 80 and s.success and outcome.stopped_by_guard is None
    assert l0_left(store) == {7, 8, 9, 10}
    assert s.requests["DeleteObjects"] >= 1
    assert list_runs(store, ROOT) == [s.run_id]


def test_the_delete_fraction_guard_stops_a_large_round(
    store: S3ObjectStore, world: list[str]
) -> None:
    stopped = collect_once(store, stats_for(store), ROOT, settings(max_fraction=0.5))
    assert stopped.stopped_by_guard is not None and "60.0%" in stopped.stopped_by_guard
    assert stopped.summary.deleted == 0 and not stopped.summary.success
    assert len(l0_left(store)) == 10
    forced = collect_once(store, stats_for(store), ROOT, settings(max_fraction=0.5), force=True)
    assert forced.summary.deleted == 120 and forced.summary.success
    assert forced.summary.listed == 124, "forced rounds stream and stop each shard at M"
    assert l0_left(store) == {7, 8, 9, 10}


def test_dry_run_writes_the_plan_and_deletes_nothing(
    store: S3ObjectStore, world: list[str]
) -> None:
    outcome = collect_once(store, stats_for(store), ROOT, settings(), dry_run=True)
    assert outcome.summary.dry_run and outcome.summary.deleted == 0
    assert outcome.plan_key is not None
    table = pq.read_table(io.BytesIO(store.get(outcome.plan_key).body))
    assert table.num_rows == 120 and table.column_names == ["key", "size", "last_modified"]
    planned = {parse_l0_key(k, ROOT).epoch for k in table.column("key").to_pylist()}  # type: ignore[union-attr]
    assert planned == set(range(1, 7))
    assert len(l0_left(store)) == 10


def test_untrusted_inputs_block_the_round(store: S3ObjectStore, world: list[str]) -> None:
    store.put_if_absent(f"{ROOT}/meta/controller/{11:020d}", b"garbage")
    with pytest.raises(SafetyBlockedError):
        collect_once(store, stats_for(store), ROOT, settings())
    assert len(l0_left(store)) == 10


def test_cli_collect_and_runs(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore, world: list[str]
) -> None:
    config = write_gc_config(
        tmp_path / "gc.toml", s3_server.endpoint_url, bucket, shards=4, max_delete_fraction=0.5
    )
    stopped = run_cli("gc", "collect", "--config", str(config), "--json")
    assert stopped.returncode == 1 and json.loads(stopped.stdout)["stopped"]
    dry = run_cli("gc", "collect", "--dry-run", "--force", "--config", str(config), "--json")
    assert dry.returncode == 0 and json.loads(dry.stdout)["plan_key"].endswith("plan.parquet")
    done = run_cli("gc", "collect", "--force", "--config", str(config))
    assert done.returncode == 0 and "deleted 120" in done.stdout
    info = json.loads(run_cli("gc", "epoch-info", "--config", str(config), "--json").stdout)
    assert (info["cluster_epoch"], info["safe_epoch"], info["lag"]) == (10, 6, 4)
    assert info["pinning"] == [
        {"topic": "orders", "partition": 0, "safe_epoch": 6, "node": "node-1", "stuck": None}
    ]
    runs = json.loads(run_cli("gc", "runs", "--config", str(config), "--json").stdout)
    assert sorted(r["deleted"] for r in runs) == [0, 0, 120], "ids sort by second only"
    assert l0_left(store) == {7, 8, 9, 10}


def test_a_one_shot_round_pushes_its_figures_to_a_real_pushgateway(
    tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str, world: list[str]
) -> None:
    with pushgateway(tmp_path) as gateway:
        config = write_gc_config(
            tmp_path / "push.toml",
            s3_server.endpoint_url,
            bucket,
            f'[metrics]\npushgateway = "{gateway}"\n',
            shards=4,
        )
        done = run_cli("gc", "collect", "--config", str(config))
        assert done.returncode == 0, done.stderr
        text = urllib.request.urlopen(f"http://{gateway}/metrics", timeout=5).read().decode()
    assert (
        'epochgc_gc_run_deleted_objects{engine="local",instance="",job="epochgc_collect"} 120'
        in (text)
    )


def test_a_pause_stops_a_forced_round_and_a_dry_run_still_runs(
    store: S3ObjectStore, world: list[str]
) -> None:
    pause(store, ROOT, by="alice", reason="incident 42", now=datetime.now(UTC))
    for guard in (0.9, 1.0):
        with pytest.raises(EpochGCError, match=r"^paused by alice: incident 42$"):
            collect_once(store, stats_for(store), ROOT, settings(max_fraction=guard), force=True)
    assert l0_count(store) == 200
    dry = collect_once(store, stats_for(store), ROOT, settings(), dry_run=True)
    assert dry.summary.eligible == 120 and dry.plan_key is not None
    assert l0_count(store) == 200


def test_a_pause_between_counting_and_deleting_stops_the_round(
    store: S3ObjectStore, world: list[str]
) -> None:
    pausing = PauseAfterFirstControlRead(store, ROOT, by="bob", reason="look first")
    with pytest.raises(EpochGCError, match=r"^paused by bob: look first$"):
        collect_once(pausing, stats_for(store), ROOT, settings(max_fraction=0.9))  # type: ignore[arg-type]
    assert pausing.control_reads == 2, "read before counting and again before deleting"
    assert l0_count(store) == 200


def test_cli_collect_refuses_while_paused(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore, world: list[str]
) -> None:
    config = write_gc_config(
        tmp_path / "gc.toml", s3_server.endpoint_url, bucket, shards=4, max_delete_fraction=None
    )
    paused = run_cli("gc", "pause", "--reason", "disk swap", "--config", str(config))
    assert paused.returncode == 0, paused.stderr
    assert "`gc collect` and `gc spark` refuse to delete" in paused.stdout
    refused = run_cli("gc", "collect", "--force", "--config", str(config))
    assert refused.returncode == 1 and refused.stdout == ""
    errors = fatal_lines(refused)
    assert refused.stderr.splitlines() == errors and len(errors) == 1, refused.stderr
    assert errors[0].endswith(": disk swap") and errors[0].startswith("epochgc: paused by ")
    assert l0_count(store) == 200
    dry = run_cli("gc", "collect", "--dry-run", "--config", str(config))
    assert dry.returncode == 0, dry.stderr


def test_every_shard_in_the_bucket_is_swept(
    store: S3ObjectStore, bucket: str, world: list[str]
) -> None:
    """Another writer spread over more shards than this config says (or the
    setting was lowered): their old objects are ours to collect too. Prefixes
    under l0/ that are not shards are never touched."""
    others = [encode_l0_key(ROOT, s, e, str(uuid.uuid4())) for s in (7, 123, 999) for e in (2, 9)]
    foreign = [
        f"{ROOT}/l0/0007/{2:018d}/{uuid.uuid4()}",
        f"{ROOT}/l0/ab/{2:018d}/{uuid.uuid4()}",
        f"{ROOT}/l0/{2:018d}",
    ]
    seed_objects(bucket, others + foreign)
    for guard in (0.9, 1.0):
        collect_once(store, stats_for(store), ROOT, settings(max_fraction=guard))
    left = {o.key for o in store.list_objects(f"{ROOT}/l0/")}
    assert {k for k in others if k in left} == {k for k in others if "/000000000000000009/" in k}
    assert set(foreign) <= left
    assert {parse_l0_key(k, ROOT).epoch for k in world if k in left} == {7, 8, 9, 10}  # type: ignore[union-attr]


def test_a_guarded_round_reports_the_bytes_it_listed(
    store: S3ObjectStore, bucket: str, world: list[str]
) -> None:
    """``bytes_listed`` feeds epochgc_l0_bytes_outstanding: with the guard
    on, the bytes of every L0 object in the bucket before the round."""
    seed_objects(bucket, [encode_l0_key(ROOT, 2, 9, str(uuid.uuid4()))], body=b"0123456789")
    outcome = collect_once(store, stats_for(store), ROOT, settings(max_fraction=0.9))
    assert outcome.summary.deleted == 120 and outcome.summary.listed == 201
    assert outcome.bytes_listed == 200 * 1 + 10
    assert outcome.bytes_listed - outcome.summary.bytes_deleted == 80 + 10


def test_the_delete_phase_of_a_guarded_round_logs_progress(
    store: S3ObjectStore,
    world: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import functools  # noqa: PLC0415

    from epochgc.gc import sweeper  # noqa: PLC0415

    monkeypatch.setattr(
        sweeper, "ProgressLog", functools.partial(sweeper.ProgressLog, every_seconds=0.0)
    )
    caplog.set_level("INFO", logger="epochgc.gc.sweeper")
    outcome = collect_once(store, stats_for(store), ROOT, settings(max_fraction=0.9))
    assert outcome.summary.deleted == 120
    deleting = [r.getMessage() for r in caplog.records if r.getMessage().startswith("delete M=")]
    assert deleting and deleting[-1].startswith("delete M=6: 120/120 objects"), deleting


@pytest.mark.serial
def test_a_guarded_round_over_two_million_keys_keeps_no_key_in_memory(
    store: S3ObjectStore,
) -> None:
    """The guard counts while listing and the delete pass streams: what a
    round holds is its batches in flight, not its keys. (Keeping the 400,000
    eligible keys as ``ObjectInfo`` would take about 140 MB; all 2,000,000
    about 700 MB.) Peak RSS rather than tracemalloc: tracemalloc would make
    this round four times slower. What the round does hold (two shards'
    pages, the batches in flight, the pools' threads) measured 49 to 52 MiB
    on 2 cores, so the bound is 80 MiB: well clear of that, and well below
    the 133 MiB that keeping the eligible keys would add to it."""
    Controller(store, ROOT).advance_to(100)  # no topics: M = 100
    synthetic = SyntheticL0Store(
        store,
        ROOT,
        shards=20,
        per_shard=100_000,
        epochs=500,  # epochs 1..100 (20% of the keys) are at or below M
        size=1000,
        last_modified=datetime(2020, 1, 1, tzinfo=UTC),
    )
    eligible = sum(1 for i in range(100_000) if synthetic.epoch_of(i) <= 100) * 20
    outcome, growth = peak_rss_growth(
        lambda: collect_once(
            synthetic,  # type: ignore[arg-type]
            stats_for(store),
            ROOT,
            dataclasses.replace(settings(max_fraction=0.5), shard_concurrency=2),
        )
    )
    s = outcome.summary
    assert outcome.stopped_by_guard is None
    assert (s.listed, s.eligible, s.deleted) == (2_000_000, eligible, eligible)
    assert synthetic.deleted == eligible and eligible == 400_000
    assert outcome.bytes_listed == 2_000_000 * 1000
    assert growth < 80 * 2**20, f"peak RSS rose by {growth / 2**20:.0f} MiB"


def test_a_daemon_round_started_before_it_saw_the_pause_deletes_nothing(
    store: S3ObjectStore, world: list[str]
) -> None:
    """The daemon polls the control document on its own schedule; a pause
    landing just before a round must still stop that round's deletions."""
    collector = Collector(store, stats_for(store), ROOT, settings())
    assert collector.state is CollectorState.RUNNING
    pause(store, ROOT, by="erin", reason="just now", now=datetime.now(UTC))
    report = collector.run_round()
    assert report.outcome is RoundOutcome.PAUSED
    assert report.error == "paused by erin: just now"
    assert l0_count(store) == 200
