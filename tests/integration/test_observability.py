"""Observability against real servers: Prometheus scraping a running daemon,
the demo's /metrics against every name the dashboard and alerts use,
promtool on the alert rules, and bounded series with 10,000 partitions."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import ScheduleSettings
from epochgc.gc.daemon.scheduler import DaemonSettings, GcDaemon
from epochgc.leases.timing import LeasePolicy
from epochgc.metrics.push import RUN_GAUGES, run_registry
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller, ControllerView, TopicInfo
from epochgc.watermarks.safe_epoch.aggregate import join_safe_epoch
from epochgc.watermarks.safe_epoch.reports import NodeReport, PartitionReport
from tests.support.cli import REPO
from tests.support.config_files import write_server_config
from tests.support.moto_seed import seed_objects
from tests.support.servers import free_port, prometheus, pushgateway, query
from tests.support.waiting import wait_for as wait_for_condition

ROOT = "epochgc"
DASHBOARDS = REPO / "dashboards"
CLI = (sys.executable, "-m", "epochgc.cli")
DEMO = (*CLI, "demo")


# Prometheus scrapes every second: wait longer, poll less often.
wait_for = functools.partial(wait_for_condition, timeout=30.0, poll=0.2)


def daemon_settings() -> DaemonSettings:
    return DaemonSettings(
        node_id="gc-obs",
        collect=CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0),
        schedule=ScheduleSettings(
            interval=timedelta(seconds=0.5),
            after_progress=timedelta(seconds=0.1),
            epoch_interval=timedelta(seconds=60),
        ),
        lease=LeasePolicy(ttl_seconds=3.0, renew_interval_seconds=0.2, skew_margin_seconds=0.5),
        ticker=False,
        metrics_listen="127.0.0.1:0",
    )


def test_prometheus_scrapes_the_daemon_and_promql_sees_m_deletions_and_lag(
    tmp_path: Path, store: S3ObjectStore, bucket: str
) -> None:
    controller = Controller(store, ROOT)
    controller.advance_to(6)
    controller.create_topic("orders", 2)  # revision 7, no report: M(p) = 6
    controller.advance_to(12)  # M = 6, lag = 6
    keys = [encode_l0_key(ROOT, s, e, str(uuid.uuid4())) for s in range(4) for e in range(1, 11)]
    seed_objects(bucket, keys)
    eligible = sum(1 for e in range(1, 11) if e <= 6) * 4
    daemon = GcDaemon(store, RequestStats(), ROOT, daemon_settings())
    daemon.start()
    try:
        assert daemon.metrics_url is not None
        target = daemon.metrics_url.removeprefix("http://")
        with prometheus([target], tmp_path) as url:

            def scraped(promql: str, expected: float) -> Callable[[], bool]:
                return lambda: [v for _, v in query(url, promql)] == [expected]

            wait_for(scraped("epochgc_collector_safe_epoch", 6), what="M in Prometheus")
            wait_for(
                scraped("epochgc_collector_objects_deleted_total", eligible),
                what="deleted count in Prometheus",
            )
            wait_for(scraped("epochgc_collector_epoch_lag", 6), what="lag in Prometheus")
            lowest = query(url, 'epochgc_collector_lowest_partition_safe_epoch{topic="orders"}')
            assert sorted((m["partition"], v) for m, v in lowest) == [("0", 6.0), ("1", 6.0)]
            assert query(url, 'epochgc_collector_state{state="running"}')[0][1] == 1.0
            assert query(url, "up")[0][1] == 1.0
    finally:
        daemon.stop()


def test_killing_the_only_daemon_puts_the_daemon_down_alert_in_pending(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str
) -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    config = write_server_config(
        tmp_path / "gc.toml",
        s3_server.endpoint_url,
        bucket,
        f'[epoch]\nticker = false\n[metrics]\nlisten = "{target}"\n',
    )
    daemon = subprocess.Popen(
        [sys.executable, "-m", "epochgc.cli", "daemon", "--config", str(config)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with prometheus(
            [target], tmp_path, job="epochgc-daemon", rules=DASHBOARDS / "alerts.yml"
        ) as url:

            def down_alerts(state: str) -> list[dict[str, str]]:
                promql = f'ALERTS{{alertname="EpochgcDaemonDown",alertstate="{state}"}}'
                return [labels for labels, _ in query(url, promql)]

            wait_for(
                lambda: [v for _, v in query(url, 'up{job="epochgc-daemon"}')] == [1.0],
                what="the daemon scraped",
            )
            wait_for(lambda: down_alerts("pending") == [], what="no daemon-down alert while up")
            daemon.kill()  # SIGKILL: no clean stop, no lease release
            daemon.wait(timeout=10)
            wait_for(lambda: down_alerts("pending") != [], what="the daemon-down alert pending")
            (labels,) = down_alerts("pending")
            assert labels["instance"] == target and labels["job"] == "epochgc-daemon"
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=10)


def metric_names(text: str) -> set[str]:
    """Sample names, plus the names of families exported without samples
    (``epochgc_partition_stuck`` has a series only while a partition is
    stuck)."""
    families = list(text_string_to_metric_families(text))
    return {sample.name for family in families for sample in family.samples} | {
        family.name for family in families if family.type == "gauge"
    }


def used_names(text: str) -> set[str]:
    return set(re.findall(r"\bepochgc_[a-z0-9_]+", text))


def scraped_while_running(demo: subprocess.Popen[str], prom: str) -> bool:
    """Whether Prometheus holds the demo's acknowledgements and its deletion
    counter; an AssertionError once the demo has ended without that."""
    acked = query(prom, "sum(epochgc_producer_records_acked_total)")
    deleted = query(prom, "epochgc_collector_objects_deleted_total")
    if acked and acked[0][1] > 0 and deleted:
        return True
    assert demo.poll() is None, "the demo ended before Prometheus scraped what it needed"
    return False


def test_the_demo_exports_every_metric_the_dashboard_and_alerts_use(tmp_path: Path) -> None:
    demo = subprocess.Popen(
        [*DEMO, "--duration", "12", "--config", "config/local.toml"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert demo.stdout is not None
    try:
        first = demo.stdout.readline()
        match = re.search(r"metrics at (http://[0-9.:]+)/metrics", first)
        assert match, first
        base = match.group(1)
        with prometheus([base.removeprefix("http://")], tmp_path) as prom:
            lines = [demo.stdout.readline() for _ in range(5)]  # header + 4 table rows
            assert "produce" in lines[-1], lines
            exported = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
            # Acknowledgements begin seconds into the produce phase, so
            # Prometheus sees them while the demo runs. Deletions are not
            # waited for here: the first may come in the demo's last sweep,
            # under a second before it stops serving /metrics.
            wait_for(
                lambda: scraped_while_running(demo, prom),
                what="Prometheus to scrape the demo's acknowledgements and deletion counter",
            )
        rest, _ = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 0 and "demo OK" in rest
    deleted = re.search(r"L0 objects deleted: +(\d+)", rest)
    assert deleted and int(deleted.group(1)) > 0, rest
    pushed = generate_latest(run_registry("spark-listing", dict.fromkeys(RUN_GAUGES, 1), {"x": 1}))
    available = metric_names(exported) | metric_names(pushed.decode())
    dashboard = json.loads((DASHBOARDS / "epochgc.json").read_text())
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p.get("targets", []))
    missing = used_names(exprs) - available
    assert not missing, f"dashboard uses metrics nobody exports: {sorted(missing)}"
    alert_missing = used_names((DASHBOARDS / "alerts.yml").read_text()) - available
    assert not alert_missing, f"alerts use metrics nobody exports: {sorted(alert_missing)}"
    # Only the bounded pinning gauge has per-partition labels.
    for family in text_string_to_metric_families(exported):
        for sample in family.samples:
            if "partition" in sample.labels or "topic" in sample.labels:
                assert family.name == "epochgc_collector_lowest_partition_safe_epoch"


def test_the_dashboard_takes_its_datasource_as_a_variable() -> None:
    dashboard = json.loads((DASHBOARDS / "epochgc.json").read_text())
    (variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus"
    uid = "${" + variable["name"] + "}"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels and all(p["datasource"]["uid"] == uid for p in panels)
    rows = {p["title"] for p in dashboard["panels"] if p["type"] == "row"}
    assert {
        "Safe epoch",
        "Reclaim",
        "Backlog",
        "Errors and SlowDowns",
        "Pinning partitions",
    } <= rows
    assert {"Fencing", "Reconciler", "Leases and reconciler errors", PRODUCER_ROW} <= rows


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], cwd=DASHBOARDS, capture_output=True, text=True, check=False
    )


def test_promtool_checks_the_rules_and_runs_their_unit_tests() -> None:
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "alerts_test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout + tested.stderr


def series_count(daemon: GcDaemon) -> int:
    return sum(len(f.samples) for f in daemon.registry.collect())


def test_series_stay_bounded_with_10000_partitions(store: S3ObjectStore) -> None:
    counts = []
    for partitions in (10, 10_000):
        view = ControllerView(offset=50, topics={"big": TopicInfo("big", partitions, 5, {})})
        report = NodeReport(
            "node-1",
            datetime.now(UTC),
            tuple(
                PartitionReport("big", 5, p, 1, 10 + p % 30, 0, 40, 39) for p in range(partitions)
            ),
        )
        daemon = GcDaemon(store, RequestStats(), ROOT, daemon_settings())
        daemon.collector.tracker.observe(join_safe_epoch(view, [report], k=10))
        counts.append(series_count(daemon))
    assert counts[0] == counts[1], counts


def test_the_test_pushgateway_keeps_its_state_in_the_test_folder(tmp_path: Path) -> None:
    # The Debian binary persists to /var/lib/prometheus by default: a test
    # must leave nothing outside its temporary folder.
    with pushgateway(tmp_path) as gateway:
        body = b"epochgc_probe_metric 1\n"
        request = urllib.request.Request(
            f"http://{gateway}/metrics/job/persistence-probe", data=body, method="PUT"
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status in (200, 202)
    persisted = tmp_path / "pushgateway.data"
    assert persisted.exists() and b"persistence-probe" in persisted.read_bytes()


PRODUCER_ROW = "Your producers (if they export these)"


def _rows(dashboard: dict[str, object]) -> dict[str, list[str]]:
    """Row title -> the expressions of the panels under it."""
    rows: dict[str, list[str]] = {}
    current = ""
    for panel in dashboard["panels"]:  # type: ignore[attr-defined]
        if panel["type"] == "row":
            current = panel["title"]
            rows[current] = []
        else:
            rows.setdefault(current, []).extend(t["expr"] for t in panel.get("targets", []))
    return rows


def _scrape_names(url: str) -> set[str]:
    """Every name a /metrics page exposes: samples, and the families it
    declares without a series yet (a labelled counter before its first
    increment)."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    families = list(text_string_to_metric_families(text))
    names = {sample.name for family in families for sample in family.samples}
    for family in families:
        names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
    return names


def test_every_dashboard_panel_but_the_producers_row_reads_what_shipped_processes_export(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    """The daemon and the reconciler are what an adopter runs; a panel whose
    metric only the demo's in-process producers export would stay empty.
    Those panels live in their own row, which names only producer metrics."""
    Controller(store, ROOT).create_topic("orders", 2)
    daemon_port, node_port = free_port(), free_port()
    processes = []
    for command, port in (("daemon", daemon_port), ("reconciler", node_port)):
        config = write_server_config(
            tmp_path / f"{command}.toml",
            s3_server.endpoint_url,
            bucket,
            f'[metrics]\nlisten = "127.0.0.1:{port}"\n',
        )
        processes.append(
            subprocess.Popen(
                [*CLI, command, "--duration", "20", "--config", str(config)],
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    try:
        exported: set[str] = set()
        for port in (daemon_port, node_port):
            url = f"http://127.0.0.1:{port}/metrics"

            def answers(url: str = url) -> bool:
                try:
                    urllib.request.urlopen(url, timeout=2)
                    return True
                except OSError:
                    return False

            wait_for(answers, what=url)
            exported |= _scrape_names(url)
    finally:
        for proc in processes:
            proc.terminate()
            proc.wait(timeout=30)
    pushed = generate_latest(run_registry("spark-listing", dict.fromkeys(RUN_GAUGES, 1), {"x": 1}))
    available = exported | metric_names(pushed.decode())
    rows = _rows(json.loads((DASHBOARDS / "epochgc.json").read_text()))
    producers = used_names(" ".join(rows.pop(PRODUCER_ROW)))
    assert producers and all(n.startswith("epochgc_producer_") for n in producers)
    shipped = used_names(" ".join(e for exprs in rows.values() for e in exprs))
    assert not shipped - available, (
        f"panels no shipped process feeds: {sorted(shipped - available)}"
    )
    assert not {n for n in shipped if n.startswith("epochgc_producer_")}
