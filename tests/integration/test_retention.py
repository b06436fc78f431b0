"""The retention hint on the embedded S3: truncation follows min(lro, hint),
space pressure goes further but never past lro, and removing the target
clears the hint."""

from __future__ import annotations

from datetime import UTC, datetime

from epochgc.ingest.upload import upload_l0
from epochgc.reconciler.reader import PartitionReader
from epochgc.reconciler.reconcile import Reconciler
from epochgc.reconciler.retention import RetentionTargets, update_retention_hint
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.term_writer import TermWriter
from tests.support.placeholders import append_placeholders

ROOT = "epochgc"
NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def write(store: S3ObjectStore, leader: TermWriter, records: list[bytes]) -> None:
    uploaded = upload_l0(store, ROOT, 1, [("orders", 0, records)], shards=4)
    append_placeholders(leader, 1, [uploaded.batch_for("orders", 0)])


def placeholder_offsets(replica: PartitionReplica) -> list[int]:
    return [r.log_offset for r in replica.retained]


def test_hint_truncation_pressure_and_clearing(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    topic = controller.create_topic("orders", 1, {"retention.local.target.bytes": 40})
    replica = PartitionReplica(store, ROOT, topic.partition_id(0))
    replica.open()
    leader = TermWriter(replica, 1)
    leader.start()
    for i in range(5):  # five placeholders of two 4-byte records: 16 bytes each framed
        write(store, leader, [f"r{i}-a".encode(), f"r{i}-b".encode()])
    Reconciler(store, ROOT).reconcile_once(leader)
    write(store, leader, [b"new-a", b"new-b"])  # not reconciled: records 10, 11
    targets = RetentionTargets.of(topic.config)

    hint = update_retention_hint(leader, targets, NOW, controller.epoch_started_at)
    assert hint == 6, "the two newest reconciled placeholders (32 bytes) fit in 40"
    assert replica.state.allowed_local_start_offset == 6
    assert update_retention_hint(leader, targets, NOW, controller.epoch_started_at) == 6
    appended = replica.state.applied_log_offset
    update_retention_hint(leader, targets, NOW, controller.epoch_started_at)
    assert replica.state.applied_log_offset == appended, "unchanged hint: no entry"

    replica.write_snapshot()
    replica.truncate()
    # Records 6.. stay readable from the log: placeholders 4 and 5 (records
    # 6-9) and the unreconciled one.
    assert [r.first_record for r in replica.retained] == [6, 8, 10]

    replica.write_snapshot()
    replica.truncate(ignore_hint=True)
    assert [r.first_record for r in replica.retained] == [10], "pressure: up to lro, no further"

    leader.advance_reconciled(lro=9, log_offset=replica.state.applied_log_offset)
    cleared = update_retention_hint(leader, RetentionTargets(), NOW, controller.epoch_started_at)
    assert cleared is None and replica.state.allowed_local_start_offset is None

    rows = PartitionReader(store, ROOT).read("orders", 0)
    assert [o for o, _ in rows] == list(range(12)), "everything still readable via L1 and L0"
