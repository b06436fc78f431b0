"""Reports and run summaries do not pile up: one-shot commands write no
report, the GC leader deletes gone nodes' covered reports and old runs, and
an operator can list nodes and forget a gone one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from epochgc.gc.daemon.maintenance import LeaderMaintenance, MaintenanceSettings
from epochgc.gc.run_report import new_run_id
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.timing import LeasePolicy
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import PartitionId, gc_run_summary_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    publish_report,
)
from tests.support.cli import run_cli
from tests.support.config_files import write_server_config

ROOT = "epochgc"


def reports_in(store: S3ObjectStore) -> list[str]:
    return sorted(o.key.rsplit("/", 1)[-1] for o in store.list_objects(f"{ROOT}/meta/reports/"))


def publish(store: S3ObjectStore, node: str, pid: PartitionId, safe: int, term: int) -> None:
    entry = PartitionReport(pid.topic, pid.revision, pid.partition, term, safe, 0, safe + 1, safe)
    publish_report(store, ROOT, NodeReport(node, datetime.now(UTC), (entry,)))


def test_produce_writes_no_report(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    config = write_server_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)
    done = run_cli(
        "produce",
        "orders",
        "0",
        "--create-partitions",
        "1",
        "--count",
        "3",
        "--config",
        str(config),
    )
    assert done.returncode == 0, done.stderr
    assert reports_in(store) == []


def test_the_leader_deletes_gone_covered_reports_and_old_runs(store: S3ObjectStore) -> None:
    orders = Controller(store, ROOT).create_topic("orders", 1)
    pid = orders.partition_id(0)
    publish(store, "gone", pid, safe=3, term=1)
    publish(store, "alone", PartitionId("orders", orders.revision, 0), safe=2, term=1)
    publish(store, "live", pid, safe=5, term=2)
    now = datetime.now(UTC)
    # Run retention reads the store's timestamps: both runs were stored just
    # now, whatever the clock of the collector that named them.
    behind_run = new_run_id(now - timedelta(days=40))
    young_run = new_run_id(now - timedelta(days=1))
    for run_id in (behind_run, young_run):
        store.put(gc_run_summary_key(ROOT, run_id), b"{}")
        store.put(f"{ROOT}/gc/runs/{run_id}/plan.parquet", b"x")
    clock = {"t": 1000.0}
    wall = [now]
    maintenance = LeaderMaintenance(
        store,
        ROOT,
        MaintenanceSettings(dead_after_seconds=60.0, runs_retention=timedelta(days=30)),
        monotonic=lambda: clock["t"],
        now=lambda: wall[0],
    )
    view = Controller(store, ROOT).snapshot()
    first = maintenance.run_once(view)
    assert first.reports_deleted == [] and first.runs_deleted == 0
    wall[0] = now + timedelta(days=31)
    assert maintenance.run_once(view).runs_deleted == 2
    assert list(store.list_objects(f"{ROOT}/gc/runs/")) == []
    wall[0] = now

    clock["t"] += 61
    publish(store, "live", pid, safe=6, term=2)  # the live node rewrote its report
    second = maintenance.run_once(view)
    # Both silent reports are covered by "live" (term 2, M(p) 6): M unchanged.
    assert second.reports_deleted == ["alone", "gone"]
    assert reports_in(store) == ["live"]
    clock["t"] += 61
    assert maintenance.run_once(view).reports_deleted == [], "the live node's report stays"


def test_node_list_and_forget(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    controller = Controller(store, ROOT)
    orders = controller.create_topic("orders", 2)
    controller.advance_to(20)  # M is bounded by the controller offset too
    publish(store, "fresh", orders.partition_id(0), safe=4, term=1)
    stale = PartitionReport("orders", orders.revision, 1, 1, 7, 0, 8, 7)
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    publish_report(store, ROOT, NodeReport("stale", long_ago, (stale,)))
    config = write_server_config(
        tmp_path / "c.toml", s3_server.endpoint_url, bucket, "[reports]\ndead_after_seconds = 600\n"
    )
    listed = run_cli("node", "list", "--config", str(config), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["node"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"fresh", "stale"} and rows["stale"]["entries"] == 1
    assert rows["stale"]["report_age_seconds"] > 7000

    refused = run_cli("node", "forget", "fresh", "--config", str(config))
    assert refused.returncode == 1 and "looks alive" in refused.stderr
    forgot = run_cli("node", "forget", "stale", "--config", str(config))
    assert forgot.returncode == 0, forgot.stderr
    # M was min(7, 4) = 4 with it and min(revision - 1, 4) without: it drops.
    assert f"M drops from 4 to {orders.revision - 1}" in forgot.stdout
    assert f"orders/1@{orders.revision}" in forgot.stdout
    assert reports_in(store) == ["fresh"]


def test_node_list_shows_node_leases_and_partitions_owned(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    controller = Controller(store, ROOT)
    orders = controller.create_topic("orders", 3)
    pids = [orders.partition_id(p) for p in range(3)]
    policy = LeasePolicy(ttl_seconds=60.0, renew_interval_seconds=5.0, skew_margin_seconds=1.0)
    live = NodeLease(store, ROOT, "node-a", policy=policy)
    assert live.try_acquire()
    NodeOwnership(store, ROOT, live, max_moves_per_round=10).run_round(pids)
    gone = NodeLease(store, ROOT, "node-b", policy=policy)
    assert gone.try_acquire()
    gone.release()
    config = write_server_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)

    listed = run_cli("node", "list", "--config", str(config), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["node"]: r for r in json.loads(listed.stdout)}
    assert rows["node-a"]["lease"] == "live"
    assert rows["node-a"]["incarnation"] == live.incarnation
    assert rows["node-a"]["partitions_owned"] == 3
    assert rows["node-b"]["lease"] == "released" and rows["node-b"]["partitions_owned"] == 0
    human = run_cli("node", "list", "--config", str(config))
    assert human.returncode == 0, human.stderr
    line = next(x for x in human.stdout.splitlines() if x.startswith("node-a"))
    assert "live" in line and live.incarnation[:8] in line
