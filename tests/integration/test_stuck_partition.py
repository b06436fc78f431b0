"""A partition whose L0 object vanished before reconciliation (docs/operating.md,
"Stuck partitions"), end to end on the embedded S3:
the stall and its cause are visible (node report, ``gc epoch-info``,
metric), ``epochgc partition skip`` records the loss through the command
line, reconciliation and ``M`` move on, and readers of the lost offsets get
a clear error while the records after them still read back."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from epochgc.errors import L0UnreadableError, RecordsLostError
from epochgc.ingest.upload import upload_l0
from epochgc.reconciler.fetch import pending_placeholders
from epochgc.reconciler.node_samples import sample_node
from epochgc.reconciler.reader import PartitionReader
from epochgc.reconciler.reconcile import Reconciler
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import parse_l0_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.term_writer import TermWriter
from epochgc.watermarks.safe_epoch.aggregate import SafeEpochTracker
from epochgc.watermarks.safe_epoch.compute import compute_safe_epoch
from epochgc.watermarks.safe_epoch.reports import read_reports
from tests.support.cli import run_cli
from tests.support.config_files import write_server_config
from tests.support.nodes import QUICK_POLICY, eager_settings, node_and_producer, publish_report_now
from tests.support.placeholders import append_placeholders

ROOT = "epochgc"
SETTINGS = eager_settings(stuck_retry_seconds=0.0)


def test_missing_l0_object_stalls_visibly_and_skip_lets_m_move(
    store: S3ObjectStore,
    s3_server: EmbeddedS3,
    bucket: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = str(write_server_config(tmp_path / "cli.toml", s3_server.endpoint_url, bucket))
    asyncio.run(_scenario(store, config, caplog))


async def _scenario(store: S3ObjectStore, config: str, caplog: pytest.LogCaptureFixture) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    topic = controller.create_topic("orders", 1)
    async with node_and_producer(
        store, ROOT, controller, settings=SETTINGS, policy=QUICK_POLICY
    ) as n:
        node, producer = n.node, n.producer
        await node.run_round()
        # Three placeholders in three epochs (three L0 objects); the node
        # runs no round in between, so none is reconciled yet.
        assert await producer.produce("orders", 0, [b"a0", b"a1"]) == [0, 1]
        await asyncio.to_thread(controller.tick)
        assert await producer.produce("orders", 0, [b"b0", b"b1", b"b2"]) == [2, 3, 4]
        await asyncio.to_thread(controller.tick)
        assert await producer.produce("orders", 0, [b"c0"]) == [5]
        await producer.close()

        pid = topic.partition_id(0)
        replica = PartitionReplica(store, ROOT, pid)
        replica.open()
        pending = pending_placeholders(replica, -1)
        lost_key = pending[1].batches[0].l0_key
        lost = parse_l0_key(lost_key, ROOT)
        assert lost is not None and pending[1].first_record == 2
        store.delete(lost_key)

        with caplog.at_level(logging.WARNING, logger="epochgc.reconciler.node"):
            for _ in range(3):
                await node.run_round()  # retries every round (stuck_retry_seconds 0)
        stuck_lines = [r.getMessage() for r in caplog.records if "is stuck" in r.getMessage()]
        assert len(stuck_lines) == 1, "one WARNING per cause, not one per retry"
        assert (
            lost_key in stuck_lines[0] and "partition skip orders 0 --through 4" in stuck_lines[0]
        )
        state = node.led_services()[0].leader.replica.state
        assert state.lro == 1, "the records before the missing object are reconciled"
        assert state.safe_epoch < lost.epoch

        # The cause is visible: node report, epoch-info, metric sample.
        reports, _ = read_reports(store, ROOT)
        [entry] = [e for r in reports for e in r.partitions]
        assert entry.stuck is not None
        assert (entry.stuck.cause, entry.stuck.key) == ("missing", lost_key)
        assert (entry.stuck.first_offset, entry.stuck.last_offset) == (2, 4)
        sample = sample_node(node)
        assert [(s.topic, s.partition, s.cause) for s in sample.stuck] == [("orders", 0, "missing")]
        info = run_cli("gc", "epoch-info", "--config", config, "--json")
        assert info.returncode == 0, info.stderr
        [pin] = json.loads(info.stdout)["pinning"]
        assert pin["stuck"]["key"] == lost_key and pin["stuck"]["first_offset"] == 2
        human = run_cli("gc", "epoch-info", "--config", config)
        assert "stuck: missing" in human.stdout and lost_key in human.stdout
        m_before = compute_safe_epoch(controller, store, ROOT, SafeEpochTracker())
        assert m_before is not None and m_before.safe_epoch < lost.epoch

        # gc explain: the newest object is kept, and the answer names the
        # stuck partition, its owner and lag.
        newest_key = pending[2].batches[0].l0_key
        explained = run_cli("gc", "explain", newest_key, "--config", config, "--json")
        assert explained.returncode == 0, explained.stderr
        answer = json.loads(explained.stdout)
        assert answer["deletable"] is False
        codes = [r["code"] for r in answer["reasons"] if r["blocking"]]
        assert codes == ["above_safe_epoch", "too_young"], "gc.min_object_age_seconds is 1h"
        [pinned] = answer["pinning"]
        assert (pinned["topic"], pinned["partition"]) == ("orders", 0)
        assert pinned["owner"].startswith("node-a"), "the lease holder (node and incarnation)"
        assert pinned["lag_records"] == 4 and pinned["stuck"]["key"] == lost_key

        # The way out, through the command line.
        refused = run_cli("partition", "skip", "orders", "0", "--through", "4", "--config", config)
        assert refused.returncode == 2 and "--accept-data-loss" in refused.stderr
        assert f"{lost_key} (missing)" in refused.stdout, "the plan is shown before refusing"
        skipped = run_cli(
            "partition", "skip", "orders", "0", "--through", "4", "--accept-data-loss",
            "--reason", "object deleted by hand", "--config", config,
        )  # fmt: skip
        assert skipped.returncode == 0, skipped.stderr
        assert "records 2..4" in skipped.stdout and "Traceback" not in skipped.stderr
        # Reconciliation and M move on.
        for _ in range(2):
            await asyncio.to_thread(controller.tick)
            for _ in range(3):
                await node.run_round()
        state = node.led_services()[0].leader.replica.state
        assert state.lro == 5 and state.is_fully_reconciled
        assert state.safe_epoch >= lost.epoch
        assert sample_node(node).stuck == ()
        await publish_report_now(node)
        reports, _ = read_reports(store, ROOT)
        assert all(e.stuck is None for r in reports for e in r.partitions)
        m_after = compute_safe_epoch(controller, store, ROOT, SafeEpochTracker())
        assert m_after is not None and m_after.safe_epoch >= lost.epoch > m_before.safe_epoch

    reader = PartitionReader(store, ROOT)
    with pytest.raises(RecordsLostError, match=r"records 2\.\.4 .*object deleted by hand"):
        await asyncio.to_thread(reader.read, "orders", 0)
    with pytest.raises(RecordsLostError):
        await asyncio.to_thread(reader.read, "orders", 0, 3)
    assert await asyncio.to_thread(reader.read, "orders", 0, 5) == [(5, b"c0")]


def test_a_corrupt_l0_object_stops_the_pass_after_the_readable_placeholders(
    store: S3ObjectStore,
) -> None:
    """A chunk that does not decode names the object and the placeholder's
    records; the placeholders before it are still reconciled, none after."""
    controller = Controller(store, ROOT)
    controller.tick()
    topic = controller.create_topic("orders", 1)
    replica = PartitionReplica(store, ROOT, topic.partition_id(0))
    replica.open()
    leader = TermWriter(replica, term=1)
    leader.start()
    keys = []
    for records in ([b"a0", b"a1"], [b"b0"], [b"c0", b"c1"]):
        epoch = controller.current_epoch()
        uploaded = upload_l0(store, ROOT, epoch, [("orders", 0, records)], shards=4)
        append_placeholders(leader, epoch, [uploaded.batch_for("orders", 0)])
        keys.append(uploaded.key)
    size = store.head(keys[1]).size
    store.put(keys[1], b"\xff" * size)
    with pytest.raises(L0UnreadableError) as info:
        Reconciler(store, ROOT).reconcile_once(leader)
    err = info.value
    assert (err.cause, err.key, err.first_record, err.last_record) == ("corrupt", keys[1], 2, 2)
    assert replica.state.lro == 1, "the placeholder before it was reconciled"
    leader.close()
