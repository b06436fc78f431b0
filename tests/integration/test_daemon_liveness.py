"""Liveness of the daemon and the reconciler as an operator sees it: the
stale-reports warning, a second process on a metrics port already in use,
``/healthz`` when the store is unreachable, and ``gc status`` against the
lease."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from epochgc.gc.control import CollectorState, StatusDocument, write_status
from epochgc.gc.daemon.maintenance import MaintenanceSettings
from epochgc.gc.daemon.scheduler import GC_LEASE, GcDaemon
from epochgc.gc.presence import PresenceDocument, read_presences, write_presence
from epochgc.leases.role_leases import LeaseDocument, LeaseManager, encode_lease
from epochgc.leases.timing import LeasePolicy
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import lease_key, report_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.safe_epoch.reports import NodeReport, encode_report
from tests.conftest import FAST_RETRIES
from tests.integration.test_daemon import ROOT, settings
from tests.support.cli import REPO, fatal_lines, run_cli, run_python
from tests.support.config_files import write_server_config
from tests.support.faults import inject_http_errors
from tests.support.servers import free_port
from tests.support.waiting import wait_for


def test_reports_job_warns_naming_stale_and_skipped_reports(
    store: S3ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    old = datetime.now(UTC) - timedelta(seconds=600)
    store.put(report_key(ROOT, "node-old"), encode_report(NodeReport("node-old", old, ())))
    store.put(
        report_key(ROOT, "node-new"), encode_report(NodeReport("node-new", datetime.now(UTC), ()))
    )
    store.put(report_key(ROOT, "node-bad"), b"{not json")
    daemon = GcDaemon(store, RequestStats(), ROOT, settings("gc-a", report_stale_seconds=120.0))
    with caplog.at_level(logging.WARNING, logger="epochgc.gc.daemon"):
        daemon.jobs.reports()
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("epochgc.gc.daemon")]
    assert any(
        "stale node reports" in m and "node-old" in m and "node-new" not in m for m in messages
    ), messages
    assert "1 node reports could not be read and were skipped" in " | ".join(messages), messages
    assert not any(r.exc_info for r in caplog.records), "a logging error, not a warning"


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port some other process already listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize("command", ["daemon", "reconciler"])
def test_a_metrics_port_in_use_is_one_line_naming_metrics_listen(
    command: str, tmp_path: Path, s3_server: EmbeddedS3, bucket: str, busy_port: int
) -> None:
    config = write_server_config(
        tmp_path / "node.toml",
        s3_server.endpoint_url,
        bucket,
        f'[epoch]\nticker = false\n[metrics]\nlisten = "127.0.0.1:{busy_port}"\n',
    )
    proc = subprocess.run(
        [sys.executable, "-m", "epochgc.cli", command, "--config", str(config)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "metrics.listen" in line]
    assert errors == fatal_lines(proc) and len(errors) == 1, proc.stderr
    assert errors[0].startswith("epochgc: configuration error: "), errors
    assert f"127.0.0.1:{busy_port}" in errors[0], errors


def healthz(daemon: GcDaemon) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"{daemon.metrics_url}/healthz", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture
def started() -> Iterator[list[GcDaemon]]:
    daemons: list[GcDaemon] = []
    yield daemons
    for daemon in daemons:
        daemon.stop()


def unreachable_store(server: EmbeddedS3, endpoint: str, bucket: str) -> S3ObjectStore:
    client = make_s3_client(
        replace(
            server.client_settings(),
            endpoint_url=endpoint,
            connect_timeout_seconds=0.5,
            read_timeout_seconds=1.0,
        )
    )
    return S3ObjectStore(client, bucket, retry_policy=FAST_RETRIES)


@pytest.mark.parametrize("fault", ["missing bucket", "refused port"])
def test_healthz_is_503_naming_the_cause_when_the_store_is_unreachable(
    fault: str, s3_server: EmbeddedS3, started: list[GcDaemon]
) -> None:
    if fault == "missing bucket":
        store = unreachable_store(
            s3_server, s3_server.endpoint_url, f"t-missing-{uuid.uuid4().hex[:8]}"
        )
    else:
        store = unreachable_store(s3_server, f"http://127.0.0.1:{free_port()}", "t-any")
    daemon = GcDaemon(store, RequestStats(), ROOT, settings("gc-a"))
    started.append(daemon)
    daemon.start()
    # The lease TTL (3 s here) is how long the store may stay unreachable.
    wait_for(lambda: healthz(daemon)[0] == 503, timeout=15, what="/healthz turning 503")
    _status, body = healthz(daemon)
    assert body["healthy"] is False
    reason = str(body["reason"])
    assert reason.startswith("store unreachable for "), body
    assert "\n" not in reason
    assert (
        ("NoSuchBucket" in reason or "not found" in reason)
        if fault == "missing bucket"
        else ("Could not connect" in reason or "refused" in reason.lower())
    ), reason


def test_healthz_is_200_with_a_reachable_store(
    store: S3ObjectStore, started: list[GcDaemon]
) -> None:
    daemon = GcDaemon(store, RequestStats(), ROOT, settings("gc-a"))
    started.append(daemon)
    daemon.start()
    wait_for(lambda: daemon.rounds > 0, what="a first round")
    time.sleep(3.5)  # longer than the threshold: nothing failing shows up
    status, body = healthz(daemon)
    assert (status, body["healthy"], body.get("reason")) == (200, True, None), body


def test_report_ages_are_a_series_per_node_and_gone_reports_leave_none(
    store: S3ObjectStore,
) -> None:
    old = datetime.now(UTC) - timedelta(seconds=600)
    store.put(report_key(ROOT, "node-old"), encode_report(NodeReport("node-old", old, ())))
    fresh = NodeReport("node-new", datetime.now(UTC), ())
    store.put(report_key(ROOT, "node-new"), encode_report(fresh))
    daemon = GcDaemon(store, RequestStats(), ROOT, settings("gc-a"))
    daemon.jobs.reports()

    def ages() -> dict[str, float]:
        return {
            s.labels["node"]: s.value
            for f in daemon.registry.collect()
            if f.name == "epochgc_collector_report_age_seconds"
            for s in f.samples
        }

    first = ages()
    assert set(first) == {"node-old", "node-new"}
    assert 600 <= first["node-old"] < 660 and 0 <= first["node-new"] < 60
    store.delete(report_key(ROOT, "node-old"))
    daemon.jobs.reports()
    assert set(ages()) == {"node-new"}


def gc_status(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("gc", "status", "--config", str(config), *extra)


def test_gc_status_on_a_missing_bucket_exits_1_in_one_line(
    tmp_path: Path, s3_server: EmbeddedS3
) -> None:
    missing = f"t-missing-{uuid.uuid4().hex[:8]}"
    config = write_server_config(tmp_path / "gc.toml", s3_server.endpoint_url, missing)
    status = gc_status(config)
    assert status.returncode == 1, status.stdout
    assert "Traceback" not in status.stderr
    assert status.stderr.splitlines() == fatal_lines(status), status.stderr
    [error] = fatal_lines(status)
    assert "NoSuchBucket" in error, status.stderr


def test_gc_status_says_a_crashed_holder_no_longer_holds_the_lease_and_how_old_m_is(
    tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    config = write_server_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket)
    now = datetime.now(UTC)
    crashed = "gc-a/0123456789ab"
    write_status(
        store,
        ROOT,
        StatusDocument(
            state=CollectorState.RUNNING,
            holder=crashed,
            updated_at=now - timedelta(minutes=5),
            safe_epoch=80,
            cluster_epoch=97,
            last_outcome="collected",
            last_success_at=now - timedelta(minutes=6),
        ),
    )
    expired = LeaseDocument(crashed, 3, now - timedelta(minutes=4))
    store.put(lease_key(ROOT, GC_LEASE), encode_lease(expired))
    status = gc_status(config)
    assert status.returncode == 0, status.stderr
    text = status.stdout
    assert f"last published running by {crashed} 5m ago" in text, text
    assert f"{crashed} no longer holds the gc lease" in text, text
    assert "daemon:     running" not in text, text
    assert "M:          80 (cluster epoch 97), as of 5m ago" in text, text
    assert "expired 4m ago" in text, text
    data = json.loads(gc_status(config, "--json").stdout)
    assert data["daemon"]["holder_holds_lease"] is False
    assert 290 <= data["daemon"]["age_seconds"] <= 400


def test_gc_status_lists_the_leader_and_its_standbys(
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    bucket: str,
    started: list[GcDaemon],
) -> None:
    config = write_server_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket)
    leader = GcDaemon(store, RequestStats(), ROOT, settings("gc-a"))
    started.append(leader)
    leader.start()
    wait_for(lambda: leader.rounds > 0, what="a first round")
    standby = GcDaemon(store, RequestStats(), ROOT, settings("gc-b"))
    started.append(standby)
    standby.start()

    def daemons() -> dict[str, str]:
        rows = json.loads(gc_status(config, "--json").stdout)["daemons"]
        return {row["node"]: row["role"] for row in rows}

    wait_for(lambda: daemons() == {"gc-a": "leader", "gc-b": "standby"}, what="both listed")
    text = gc_status(config).stdout
    assert f"daemon:     running, published by {leader.leases.holder}" in text, text
    assert "gc-b" in text and "standby" in text, text
    standby.stop()
    wait_for(lambda: daemons() == {"gc-a": "leader"}, what="a clean stop leaves the list")


def test_the_leader_deletes_the_presence_of_a_daemon_gone_for_good(
    store: S3ObjectStore, started: list[GcDaemon]
) -> None:
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    gone = PresenceDocument("gc-z", "gc-z/1", "leader", "running", long_ago, long_ago, 60.0)
    write_presence(store, ROOT, gone)
    leader = GcDaemon(
        store,
        RequestStats(),
        ROOT,
        settings(
            "gc-a",
            maintenance_interval_seconds=0.3,
            maintenance=MaintenanceSettings(dead_after_seconds=600.0),
        ),
    )
    started.append(leader)
    leader.start()
    wait_for(
        lambda: [d.node for d in read_presences(store, ROOT)[0]] == ["gc-a"],
        what="the gone daemon's presence deleted, the leader's kept",
    )


def test_healthz_is_503_while_the_leaders_lease_renewals_fail(
    s3_client: Any, store: S3ObjectStore, started: list[GcDaemon]
) -> None:
    lease = LeasePolicy(ttl_seconds=10.0, renew_interval_seconds=0.5, skew_margin_seconds=0.5)
    daemon = GcDaemon(store, RequestStats(), ROOT, settings("gc-a", lease=lease))
    started.append(daemon)
    daemon.start()
    wait_for(lambda: daemon.rounds > 0, what="a first round as leader")
    assert healthz(daemon)[0] == 200
    failing = inject_http_errors(s3_client, "PutObject", 100_000, 500, "InternalError")
    try:
        wait_for(
            lambda: str(healthz(daemon)[1]["reason"]).startswith("gc lease renewal failing"),
            timeout=8,
            what="/healthz naming the failing renewals while still the leader",
        )
        assert healthz(daemon)[0] == 503
    finally:
        failing.remove()
    wait_for(lambda: healthz(daemon)[0] == 200, timeout=10, what="healthy again")


def test_a_daemon_stopped_by_a_defect_exits_1_in_one_line_and_releases_its_lease(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    # A bug (a RuntimeError, not a store error) in one of the daemon's jobs
    # used to be logged by the scheduler, twice a second, while the daemon
    # ran on without a round and ended with status 0. It now stops the
    # daemon, lets go of the gc lease for a peer, and exits 1: its
    # supervisor restarts it and counts the restart.
    config = write_server_config(
        tmp_path / "daemon.toml",
        s3_server.endpoint_url,
        bucket,
        f'[layout]\nroot = "{ROOT}"\n'
        "[lease]\nttl_seconds = 30.0\nrenew_interval_seconds = 0.5\nskew_margin_seconds = 0.5\n"
        "[reports]\ninterval_seconds = 0.5\n"
        '[metrics]\nlisten = ""\n',
    )
    started = time.monotonic()
    done = run_python(
        *("-m", "tests.support.faulty_node", "3", "/meta/reports/", "--"),
        *("daemon", "--config", str(config), "--node-id", "gc-a", "--duration", "40"),
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 30, "it ran on until --duration"
    assert fatal_lines(done) == [
        "epochgc: gc daemon gc-a stopped: job reports failed: RuntimeError: injected: a bug"
    ], done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "RuntimeError: injected: a bug" in errors[0], done.stderr
    lease = LeaseManager.read_holder(store, ROOT, GC_LEASE)
    assert lease is not None and lease.released, lease


def test_a_job_failing_while_the_daemon_stops_leaves_a_clean_exit(store: S3ObjectStore) -> None:
    # The executor shut down under a running job is part of stopping, not a
    # defect: only a failure while running ends the daemon with exit 1.
    def broken() -> None:
        raise RuntimeError("cannot schedule new futures after shutdown")

    daemon = GcDaemon(store, RequestStats(), ROOT, settings("gc-a", metrics_listen=""))
    daemon._stopping.set()
    daemon._guarded("gc", broken)()
    assert daemon.failure is None and not daemon.done.is_set()
    running = GcDaemon(store, RequestStats(), ROOT, settings("gc-b", metrics_listen=""))
    running._guarded("gc", broken)()
    assert running.failure == (
        "job gc failed: RuntimeError: cannot schedule new futures after shutdown"
    )
    assert running.done.is_set()
