"""``partition skip`` against a bucket: the plan names the L0 objects the
skipped placeholders point into, and the entry is recorded once."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from epochgc.errors import InvalidArgumentError
from epochgc.reconciler.records_lost import plan_records_lost, record_records_lost
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import PartitionId
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.commands import PlaceholderBatch, Placeholders
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.term_writer import TermWriter

ROOT = "epochgc"
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def batch(key: str, records: int) -> PlaceholderBatch:
    return PlaceholderBatch(f"{ROOT}/l0/{key}", 0, 10, records)


def stuck_partition(store: MemoryStore) -> PartitionId:
    """Records 0..2 in L0 object ``a``; 3 in ``b`` (missing) and 4 in ``c``."""
    revision = Controller(store, ROOT).create_topic("orders", 1).revision
    pid = PartitionId("orders", revision, 0)
    leader = TermWriter(opened(store, pid), 1)
    leader.start()
    leader.append_all(
        [
            Placeholders(0, 0, 1, (batch("a", 3),)),
            Placeholders(0, 0, 1, (batch("b", 1), batch("c", 1))),
        ]
    )
    leader.close()
    for key in ("a", "c"):
        store.put(f"{ROOT}/l0/{key}", b"l0")
    return pid


def opened(store: MemoryStore, pid: PartitionId) -> PartitionReplica:
    replica = PartitionReplica(store, ROOT, pid)
    replica.open()
    return replica


def test_the_plan_names_each_l0_object_of_the_skipped_placeholders_and_writes_nothing() -> None:
    store = MemoryStore()
    pid = stuck_partition(store)
    replica = opened(store, pid)
    puts = store.count("PutObject")

    plan = plan_records_lost(store, replica, 4, by="ops@host", reason="gone", now=NOW)

    assert (plan.partition, plan.command.first, plan.command.last) == (pid, 0, 4)
    assert (plan.records, plan.placeholders) == (5, 2)
    assert plan.l0_objects == {f"{ROOT}/l0/a": True, f"{ROOT}/l0/b": False, f"{ROOT}/l0/c": True}
    assert (plan.command.by, plan.command.reason) == ("ops@host", "gone")
    assert store.count("PutObject") == puts, "planning writes nothing"
    first = plan_records_lost(store, replica, 2, by="ops@host", reason="gone", now=NOW)
    assert first.l0_objects == {f"{ROOT}/l0/a": True} and first.placeholders == 1
    with pytest.raises(InvalidArgumentError, match="inside the placeholder"):
        plan_records_lost(store, replica, 3, by="ops@host", reason="gone", now=NOW)


def test_recording_moves_lro_and_the_next_plan_starts_above_it() -> None:
    store = MemoryStore()
    pid = stuck_partition(store)
    replica = opened(store, pid)

    entry = record_records_lost(replica, 2, by="ops@host", reason="gone", now=NOW)

    assert replica.state.lro == 2 and len(opened(store, pid).lost) == 1
    assert entry.offset == replica.state.applied_log_offset
    rest = plan_records_lost(store, replica, 4, by="ops@host", reason="gone", now=NOW)
    assert (rest.command.first, sorted(rest.l0_objects)) == (3, [f"{ROOT}/l0/b", f"{ROOT}/l0/c"])
    with pytest.raises(InvalidArgumentError, match="nothing to skip"):
        record_records_lost(replica, 2, by="ops@host", reason="gone", now=NOW)
