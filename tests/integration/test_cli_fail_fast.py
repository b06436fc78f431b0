"""One-shot commands say at once what they are doing or why they cannot:
`produce` on a partition another node leads fails fast naming that node,
and `epoch advance` announces its work before the first tick."""

from __future__ import annotations

import time
from pathlib import Path

from epochgc.leases.node_lease import NodeLease
from epochgc.leases.timing import LeasePolicy
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import PartitionId, owner_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.support.cli import run_cli
from tests.support.config_files import write_server_config


def test_produce_fails_fast_naming_the_node_that_leads_the_partition(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    topic = Controller(store, "epochgc").create_topic("orders", 2)
    lease = NodeLease(store, "epochgc", "recon-elsewhere", policy=LeasePolicy(60.0, 5.0, 1.0))
    assert lease.try_acquire()
    other = NodeOwnership(store, "epochgc", lease, max_moves_per_round=10)
    pids = [PartitionId("orders", topic.revision, p) for p in range(2)]
    other.run_round(pids)
    assert other.owned() == frozenset(pids)
    record = store.get(owner_key("epochgc", pids[0]))
    config = write_server_config(tmp_path / "produce.toml", s3_server.endpoint_url, bucket)
    started = time.monotonic()
    done = run_cli("produce", "orders", "0", "--count", "3", "--config", str(config))
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert elapsed < 20, f"took {elapsed:.0f}s to give up"
    assert "recon-elsewhere" in done.stderr
    assert "stop" in done.stderr  # says what to do
    assert "Traceback" not in done.stderr
    # The other node's record is untouched: produce never takes a led partition.
    assert store.get(owner_key("epochgc", pids[0])).etag == record.etag


def test_epoch_advance_announces_its_work_before_ticking(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    Controller(store, "epochgc").tick()
    config = write_server_config(tmp_path / "advance.toml", s3_server.endpoint_url, bucket)
    done = run_cli("epoch", "advance", "--to", "12", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "advancing the cluster epoch from 1 to 12 (11 ticks" in done.stderr
    assert "cluster epoch is now 12" in done.stdout
