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

import pytest

from epochgc.gc.daemon import GcDaemon
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import report_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.reports import NodeReport, encode_report
from tests.conftest import FAST_RETRIES
from tests.integration.test_daemon import ROOT, settings
from tests.support.cli import REPO
from tests.support.config_files import write_server_config
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
        daemon._reports_job()
    messages = [r.getMessage() for r in caplog.records if r.name == "epochgc.gc.daemon"]
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
    assert len(errors) == 1, proc.stderr
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
    daemon._reports_job()

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
    daemon._reports_job()
    assert set(ages()) == {"node-new"}
