"""Liveness of the daemon and the reconciler as an operator sees it: the
stale-reports warning, a second process on a metrics port already in use,
``/healthz`` when the store is unreachable, and ``gc status`` against the
lease."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from epochgc.gc.daemon import GcDaemon
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import report_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.reports import NodeReport, encode_report
from tests.integration.test_daemon import ROOT, settings
from tests.support.cli import REPO
from tests.support.config_files import write_server_config


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
