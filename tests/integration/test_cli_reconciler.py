"""`epochgc reconciler` as a process: leads, reports, releases on SIGTERM."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from epochgc.leases.holder_codec import decode_node_lease
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.role_leases import LeaseManager
from epochgc.leases.timing import LeasePolicy
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import PartitionId, node_lease_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.reports import read_reports
from tests.support.cli import run_cli, start_cli
from tests.support.config_files import write_server_config


def test_reconciler_node_reports_and_hands_over_on_sigterm(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    controller = Controller(store, "epochgc")
    controller.create_topic("orders", 2)
    config = write_server_config(
        tmp_path / "node.toml",
        s3_server.endpoint_url,
        bucket,
        "[lease]\nttl_seconds = 30.0\nrenew_interval_seconds = 1.0\nskew_margin_seconds = 1.0\n"
        "[epoch]\ninterval_seconds = 0.3\n"
        "[reconciler]\nround_interval_seconds = 0.2\nidle_interval_seconds = 0.0\n"
        "[reports]\ninterval_seconds = 0.2\n",
    )
    proc = start_cli("reconciler", "--config", str(config), "--node-id", "recon-1")
    try:
        deadline = time.monotonic() + 60
        while True:
            reports, _ = read_reports(store, "epochgc")
            mine = [r for r in reports if r.node == "recon-1"]
            if (
                mine
                and len(mine[0].partitions) == 2
                and min(p.safe_epoch for p in mine[0].partitions) >= 2
            ):
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no report with advancing M(p)"
            time.sleep(0.2)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert time.monotonic() - started < 10
        assert "reconciler recon-1" in out
    finally:
        if proc.poll() is None:
            proc.kill()
    # The node lease and the ownership records were released, not left to
    # expire (TTL is 30 s here): another node takes everything at once.
    lease = NodeLease(store, "epochgc", "recon-2", policy=LeasePolicy(30.0, 1.0, 1.0))
    assert lease.try_acquire()
    other = NodeOwnership(store, "epochgc", lease, max_moves_per_round=10)
    pids = [PartitionId("orders", 1, p) for p in range(2)]  # revision 1
    assert other.run_round(pids).taken == 2
    assert decode_node_lease(store.get(node_lease_key("epochgc", "recon-1")).body, "").released
    ticker = LeaseManager.read_holder(store, "epochgc", "ticker")
    assert ticker is not None and ticker.released, "the ticker role was released too"
    assert controller.current_epoch() >= 3, "the node's ticker moved the epoch"


def test_produce_smoke_test_on_the_embedded_default() -> None:
    done = run_cli(
        "produce",
        "orders",
        "1",
        "--create-partitions",
        "2",
        "--count",
        "25",
        "--config",
        "config/local.toml",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["offsets"] == list(range(25)) and report["verified"] is True
