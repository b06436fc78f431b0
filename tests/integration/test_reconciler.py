"""Reconciliation passes and the partition reader on the embedded S3."""

from __future__ import annotations

import uuid

import pytest

from epochgc.ingest.upload import upload_l0
from epochgc.reconciler.reader import PartitionReader
from epochgc.reconciler.reconcile import Reconciler
from epochgc.storage.keys import encode_l1_key, parse_l0_key
from epochgc.storage.l0_format import encode_records
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.commands import AdvanceEpoch
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.state import Outcome
from epochgc.watermarks.partition.term_writer import TermWriter
from tests.support.placeholders import append_placeholders

ROOT = "epochgc"


class Cluster:
    """A topic with two partitions led in this process, and a writer that
    packs both partitions' records into shared L0 objects."""

    def __init__(self, store: S3ObjectStore) -> None:
        self.store = store
        self.controller = Controller(store, ROOT)
        self.controller.tick()
        self.topic = self.controller.create_topic("orders", 2)
        self.leaders = []
        for partition in range(2):
            replica = PartitionReplica(store, ROOT, self.topic.partition_id(partition))
            replica.open()
            leader = TermWriter(replica, term=1)
            leader.start()
            self.leaders.append(leader)
        self.written: dict[int, list[bytes]] = {0: [], 1: []}

    def write(self, count: int, epoch: int | None = None) -> str:
        epoch = self.controller.current_epoch() if epoch is None else epoch
        chunks = []
        for partition in range(2):
            records = [
                f"p{partition}-r{len(self.written[partition]) + i}".encode() for i in range(count)
            ]
            chunks.append(("orders", partition, records))
        uploaded = upload_l0(self.store, ROOT, epoch, chunks, shards=16)
        for partition, (_t, _p, records) in enumerate(chunks):
            entry = append_placeholders(
                self.leaders[partition], epoch, [uploaded.batch_for("orders", partition)]
            )
            assert entry.result.outcome is Outcome.APPLIED
            self.written[partition].extend(records)
        return uploaded.key


@pytest.fixture
def cluster(store: S3ObjectStore) -> Cluster:
    return Cluster(store)


def read_all(store: S3ObjectStore, partition: int) -> list[bytes]:
    rows = PartitionReader(store, ROOT).read("orders", partition)
    assert [offset for offset, _ in rows] == list(range(len(rows))), "no gaps, no duplicates"
    return [record for _, record in rows]


def test_l0_keys_carry_the_epoch(cluster: Cluster) -> None:
    key = cluster.write(3)
    parsed = parse_l0_key(key, ROOT)
    assert parsed is not None and parsed.epoch == 2 and 0 <= parsed.shard < 16


def test_records_read_back_before_and_after_reconciliation(
    cluster: Cluster, store: S3ObjectStore
) -> None:
    cluster.write(3)
    cluster.controller.tick()
    cluster.write(4)
    assert read_all(store, 0) == cluster.written[0], "served from L0 before reconciliation"
    reconciler = Reconciler(store, ROOT, max_records=5)
    stats = RequestStats()
    stats.attach(store.client)
    first = reconciler.reconcile_once(cluster.leaders[0])
    requests = stats.by_operation()
    # One GET of the placeholder's log entry, one ranged GET of its L0 object;
    # the leader applies its own advance_reconciled without reading it back.
    assert requests["GetObject"] == 2
    assert requests["PutObject"] == 2, "one L1 object and one log entry"
    assert (first.records, first.lro) == (3, 2), "whole placeholders, at most ~5 records"
    second = reconciler.reconcile_once(cluster.leaders[0])
    assert (second.records, second.lro) == (4, 6)
    assert reconciler.reconcile_once(cluster.leaders[0]).records == 0
    assert read_all(store, 0) == cluster.written[0], "served from L1"
    assert read_all(store, 1) == cluster.written[1], "partition 1 still from L0"
    l1 = [o.key for o in store.list_objects(f"{ROOT}/l1/orders/2/0/")]
    assert len(l1) == 2


def test_reconciliation_lifts_m_of_p(cluster: Cluster, store: S3ObjectStore) -> None:
    leader = cluster.leaders[0]
    reconciler = Reconciler(store, ROOT)
    assert leader.replica.state.safe_epoch == 1
    cluster.write(2)  # epoch 2
    for _ in range(2):
        cluster.controller.tick()
        cluster.write(2)  # epochs 3, 4: window [3, 4]
    assert leader.replica.state.safe_epoch == 1, "nothing reconciled yet"
    reconciler.reconcile_once(leader)
    assert leader.replica.state.safe_epoch == 2, "previous_applied (3) - 1"
    # Idle housekeeping: the window slides with the cluster epoch, and a pass
    # with nothing to move records the log end, which lifts M(p).
    epoch = cluster.controller.tick()
    leader.append_all([AdvanceEpoch(0, 0, epoch)])  # what the leader service appends
    result = reconciler.reconcile_once(leader)
    assert result.records == 0
    assert result.safe_epoch == 3 == epoch - 2
    assert (
        reconciler.reconcile_once(leader).reconciled_log_offset == result.reconciled_log_offset
    ), "no churn: nothing to record when the window has not moved"


def test_an_unrecorded_l1_object_is_ignored_and_redone(
    cluster: Cluster, store: S3ObjectStore
) -> None:
    """A pass that crashed after writing L1 but before recording lro leaves
    an object with the same records; readers ignore it until lro covers it,
    then either copy serves."""
    cluster.write(3)
    orphan = encode_l1_key(ROOT, cluster.topic.partition_id(0), 0, 3, str(uuid.uuid4()))
    store.put(orphan, encode_records([b"beyond", b"lro", b"never", b"read"]))
    assert read_all(store, 0) == cluster.written[0], "L1 above lro is not read"
    Reconciler(store, ROOT).reconcile_once(cluster.leaders[0])
    assert read_all(store, 0) == cluster.written[0]


def test_reader_after_compaction(cluster: Cluster, store: S3ObjectStore) -> None:
    for _ in range(3):
        cluster.write(2)
    Reconciler(store, ROOT).reconcile_once(cluster.leaders[0])
    cluster.write(2)
    replica = cluster.leaders[0].replica
    replica.write_snapshot()
    assert replica.truncate() > 0
    assert read_all(store, 0) == cluster.written[0]
    rows = PartitionReader(store, ROOT).read("orders", 0, from_offset=5)
    assert [o for o, _ in rows] == [5, 6, 7]
