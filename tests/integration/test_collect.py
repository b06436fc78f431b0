"""One collection round (library and CLI) on the embedded S3."""

from __future__ import annotations

import io
import json
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from epochgc.gc.collect import CollectSettings, SafetyBlockedError, collect_once
from epochgc.gc.run_report import list_runs
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key, parse_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.reports import NodeReport, PartitionReport, publish_report
from tests.support.cli import run_cli
from tests.support.config_files import write_server_config
from tests.support.moto_seed import seed_objects
from tests.support.servers import pushgateway

ROOT = "epochgc"


def settings(max_fraction: float = 0.9) -> CollectSettings:
    return CollectSettings(shards=4, min_object_age=timedelta(0), max_delete_fraction=max_fraction)


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
    publish_report(
        store,
        ROOT,
        NodeReport("node-1", datetime.now(UTC), (PartitionReport("orders", 3, 0, 1, 6, 0, 7, 7),)),
    )
    keys = [
        encode_l0_key(ROOT, s, e, str(uuid.uuid4()))
        for s in range(4)
        for e in range(1, 11)
        for _ in range(5)
    ]
    seed_objects(bucket, keys)
    return keys


def l0_left(store: S3ObjectStore) -> set[int]:
    return {parse_l0_key(o.key, ROOT).epoch for o in store.list_objects(f"{ROOT}/l0/")}  # type: ignore[union-attr]


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
    config = write_server_config(
        tmp_path / "gc.toml",
        s3_server.endpoint_url,
        bucket,
        "[layout]\nl0_shards = 4\n[gc]\nmin_object_age_seconds = 0.0\nmax_delete_fraction = 0.5\n",
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
        {"topic": "orders", "partition": 0, "safe_epoch": 6, "node": "node-1"}
    ]
    runs = json.loads(run_cli("gc", "runs", "--config", str(config), "--json").stdout)
    assert [r["deleted"] for r in runs] == [0, 0, 120]
    assert l0_left(store) == {7, 8, 9, 10}


def test_a_one_shot_round_pushes_its_figures_to_a_real_pushgateway(
    tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str, world: list[str]
) -> None:
    with pushgateway() as gateway:
        config = write_server_config(
            tmp_path / "push.toml",
            s3_server.endpoint_url,
            bucket,
            "[layout]\nl0_shards = 4\n[gc]\nmin_object_age_seconds = 0.0\n"
            f'max_delete_fraction = 1.0\n[metrics]\npushgateway = "{gateway}"\n',
        )
        done = run_cli("gc", "collect", "--config", str(config))
        assert done.returncode == 0, done.stderr
        text = urllib.request.urlopen(f"http://{gateway}/metrics", timeout=5).read().decode()
    assert (
        'epochgc_gc_run_deleted_objects{engine="local",instance="",job="epochgc_collect"} 120'
        in (text)
    )
