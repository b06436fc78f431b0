"""What a collection round costs in requests at the default 1000 shards,
on the embedded S3 (issue 19, points 1 and 2)."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.collector import ScheduleSettings
from epochgc.gc.daemon.scheduler import GcDaemon
from epochgc.gc.listing.schedule import ListingPolicy
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key, gc_run_summary_key, parse_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    publish_report,
)
from tests.integration.test_daemon import settings as daemon_settings
from tests.support.cli import run_cli
from tests.support.config_files import write_gc_config
from tests.support.moto_seed import seed_objects
from tests.support.waiting import wait_for

ROOT = "epochgc"
SHARDS = 1000


MAX_LAG = 3600.0


def settings() -> CollectSettings:
    return CollectSettings(
        min_object_age=timedelta(0),
        max_delete_fraction=1.0,
        listing=ListingPolicy(max_lag_seconds=MAX_LAG),
    )


def report(store: S3ObjectStore, safe_epoch: int) -> None:
    publish_report(
        store,
        ROOT,
        NodeReport(
            "node-1",
            datetime.now(UTC),
            (PartitionReport("orders", 3, 0, 1, safe_epoch, 0, safe_epoch + 1, safe_epoch + 1),),
        ),
    )


def world(store: S3ObjectStore, bucket: str, shards: int = SHARDS) -> None:
    """M = 6 (topic at revision 3, controller at 30, its partition reports
    6); one L0 object at epoch 20 in each of ``shards`` shards, and one at epoch
    8 in shards 0, 1 and 2."""
    controller = Controller(store, ROOT)
    controller.tick()
    controller.tick()
    controller.create_topic("orders", 1)
    controller.advance_to(30)
    report(store, 6)
    keys = [encode_l0_key(ROOT, s, 20, str(uuid.uuid4())) for s in range(shards)]
    keys += [encode_l0_key(ROOT, s, 8, str(uuid.uuid4())) for s in range(3)]
    seed_objects(bucket, keys)


def lists(stats: RequestStats, before: dict[str, int]) -> int:
    return stats.by_operation().get("ListObjectsV2", 0) - before.get("ListObjectsV2", 0)


def l0_epochs(store: S3ObjectStore) -> list[int]:
    return sorted(parse_l0_key(o.key, ROOT).epoch for o in store.list_objects(f"{ROOT}/l0/"))  # type: ignore[union-attr]


def test_rounds_list_only_the_shards_worth_listing(store: S3ObjectStore, bucket: str) -> None:
    world(store, bucket)
    stats = RequestStats()
    stats.attach(store.client)
    t0 = datetime.now(UTC)
    first = collect_once(store, stats, ROOT, settings(), now=t0)
    assert first.summary.deleted == 0
    assert first.summary.shards is not None and first.summary.shards.listed == SHARDS

    before = stats.by_operation()
    idle = collect_once(store, stats, ROOT, settings(), now=t0 + timedelta(seconds=60))
    assert idle.summary.deleted == 0
    assert lists(stats, before) <= 4, "a round with nothing eligible costs a few requests"

    report(store, 8)  # three objects, in three shards, become eligible
    before = stats.by_operation()
    few = collect_once(store, stats, ROOT, settings(), now=t0 + timedelta(seconds=120))
    assert lists(stats, before) <= 4, "few eligible objects do not pay for 1000 LISTs"
    assert few.summary.deleted == 0 and l0_epochs(store).count(8) == 3
    assert few.next_listing_at is not None
    assert few.next_listing_at <= t0 + timedelta(seconds=60 + MAX_LAG)

    due = collect_once(store, stats, ROOT, settings(), now=few.next_listing_at)
    assert due.summary.deleted == 3, "they go when their shards are due, within the lag bound"
    assert l0_epochs(store) == [20] * SHARDS
    assert due.summary.cost_usd is not None and due.summary.cost_usd > 0


def test_gc_runs_shows_cost_per_run_and_per_gb_old_summaries_included(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    world(store, bucket, shards=20)
    old = {
        "v": 1,
        "run_id": "20261101T000000Z-0000abcd",
        "engine": "local",
        "dry_run": False,
        "safe_epoch": 1,
        "controller_offset": 2,
        "started_at": "2026-11-01T00:00:00Z",
        "finished_at": "2026-11-01T00:00:09Z",
        "success": True,
        "listed": 10,
        "eligible": 10,
        "deleted": 10,
        "bytes_deleted": 2**30,
        "errors": 0,
        "requests": {"ListObjectsV2": 1000, "DeleteObjects": 1},
    }
    store.put(gc_run_summary_key(ROOT, old["run_id"]), json.dumps(old).encode())  # type: ignore[arg-type]
    config = write_gc_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket)
    first = run_cli("gc", "collect", "--config", str(config), "--json")
    assert first.returncode == 0, first.stderr
    again = run_cli("gc", "collect", "--all-shards", "--config", str(config), "--json")
    assert again.returncode == 0, again.stderr
    runs = json.loads(run_cli("gc", "runs", "--config", str(config), "--json").stdout)
    assert runs[0]["run_id"] == old["run_id"] and len(runs) == 3
    assert runs[0]["cost_usd"] == pytest.approx(0.005), "a v1 summary is priced from its requests"
    assert runs[0]["usd_per_gb"] == pytest.approx(0.005)
    for row in runs[1:]:
        assert row["shards"]["listed"] == 20, "a first round and --all-shards list every shard"
        assert row["cost"]["requests_usd"] == pytest.approx(row["cost_usd"])
        assert row["cost_usd"] >= 20 * 0.005 / 1000, "at least one LIST per shard"
    table = run_cli("gc", "runs", "--config", str(config)).stdout
    assert "cost $" in table and "$/GB" in table and "0.005000" in table


@pytest.mark.serial
def test_the_daemon_lists_shards_when_due_and_deletes_within_the_lag_bound(
    store: S3ObjectStore, bucket: str
) -> None:
    world(store, bucket, shards=40)
    lag = 4.0
    listing = ListingPolicy(max_lag_seconds=lag, full_sweep_interval_seconds=3600)
    stats = RequestStats()
    stats.attach(store.client)
    daemon = GcDaemon(
        store,
        stats,
        ROOT,
        daemon_settings(
            "gc-cost",
            collect=dataclasses.replace(settings(), listing=listing),
            schedule=ScheduleSettings(
                interval=timedelta(seconds=0.3),
                epoch_interval=timedelta(seconds=60),
                scheduled_idle=timedelta(seconds=0.5),
            ),
        ),
    )

    def sample(name: str) -> float:
        return daemon.registry.get_sample_value(name) or 0.0

    daemon.start()
    try:
        wait_for(lambda: sample("epochgc_collector_shards_listed_total") >= 40, what="a full sweep")
        rounds_before = daemon.rounds
        report(store, 8)
        raised = time.monotonic()
        wait_for(lambda: 8 not in l0_epochs(store), timeout=lag * 3, what="the epoch-8 objects")
        waited = time.monotonic() - raised
        idle_rounds = daemon.rounds - rounds_before
    finally:
        daemon.stop()
    assert waited <= lag + 2, "deleted within the lag bound (plus a round)"
    assert idle_rounds >= 3, "rounds kept running"
    assert sample("epochgc_collector_shards_listed_total") <= 40 * 3, (
        "rounds in between listed no shard: today each would list all 40"
    )
    assert sample("epochgc_collector_request_cost_dollars_total") > 0
