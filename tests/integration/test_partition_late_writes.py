"""Late writes into truncated partition-log slots change nothing.

Truncation deletes the entries a snapshot covers, which frees their slots:
a create-only put whose slot was chosen before the truncation (a deposed
leader stopped between its lease check and its put, an operator's
``records_lost`` planned against an old tail) then succeeds below the
snapshot, where no reader that starts from the snapshot ever looks. Without
care, such an entry is applied by a reader that was just below it, and a
deposed leader acknowledges an append nobody will ever replay.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from epochgc.errors import EpochGCError, FencedError
from epochgc.storage.keys import partition_snapshot_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.partition.codec import encode_command
from epochgc.watermarks.partition.commands import Placeholders, RecordsLost
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.skip import plan_skip
from epochgc.watermarks.partition.term_writer import TermWriter
from tests.support.faults import OutageStore
from tests.support.placeholders import (
    ORDERS_0,
    append_placeholders,
    batch,
    create_orders,
    leader,
    open_replica,
)

ROOT = "epochgc"
PID = ORDERS_0
NOW = datetime(2026, 11, 24, tzinfo=UTC)


@pytest.fixture
def topic(store: S3ObjectStore) -> int:
    return create_orders(store)  # revision 2


def compact_all(lead: TermWriter) -> int:
    """Reconcile everything appended so far, snapshot, truncate."""
    state = lead.replica.state
    lead.advance_reconciled(lro=state.next_offset - 1, log_offset=state.applied_log_offset)
    assert lead.replica.write_snapshot()
    return lead.replica.truncate()


def test_a_reader_just_below_a_truncation_ignores_a_late_write(
    store: S3ObjectStore, topic: int
) -> None:
    lead = leader(store, 1)  # offset 0: term_start
    append_placeholders(lead, 3, batch(0))  # offset 1
    reader = open_replica(store)
    assert reader.state.applied_log_offset == 1
    for i in range(1, 4):
        append_placeholders(lead, 3, batch(i))  # offsets 2..4
    assert compact_all(lead) == 5  # offsets 0..4 gone (the tail, 5, stays): slot 2 is free
    truth = lead.replica.state
    # A writer of the current term that chose slot 2 long ago lands now.
    late = Placeholders(1, truth.last_seq + 1, 3, batch(99))
    assert lead.replica.log.append_at(2, encode_command(late))

    reader.catch_up()

    assert reader.state == truth, "the reader applied a late write below the snapshot"


def test_a_deposed_leader_never_acknowledges_a_put_into_a_truncated_slot(
    store: S3ObjectStore, topic: int
) -> None:
    old = leader(store, 1)  # offset 0
    append_placeholders(old, 3, batch(0))  # offset 1; old's next slot is 2
    # The old leader stops (a pause past its lease) before its next put.
    new = leader(store, 2)  # term_start at offset 2
    for i in range(1, 4):
        append_placeholders(new, 3, batch(i))  # offsets 3..5
    assert compact_all(new) == 6  # offsets 0..5 gone (the tail, 6, stays): slot 2 is free
    truth = open_replica(store).state

    # It resumes: its lease check passed before the pause, its put lands.
    future = old.submit(Placeholders(0, 0, 3, batch(77)))

    with pytest.raises(FencedError):
        future.result(timeout=30)
    assert open_replica(store).state == truth
    old.close()
    new.close()


def test_a_put_not_acknowledged_for_want_of_the_snapshot_check_says_so(
    store: S3ObjectStore, topic: int
) -> None:
    # Seen in `epochgc verify` logs: a failed HEAD stopped the leader with
    # "another writer snapshotted the log", which nobody had done.
    flaky = OutageStore(store, partition_snapshot_key(ROOT, PID))
    replica = PartitionReplica(flaky, ROOT, PID)  # type: ignore[arg-type]
    replica.open()
    lead = TermWriter(replica, 1)
    lead.start()
    flaky.down = True  # the HEAD of the snapshot before acknowledging
    future = lead.submit(Placeholders(0, 0, 3, batch(1)))
    with pytest.raises(EpochGCError) as caught:
        future.result(timeout=30)
    assert "cannot check the snapshot before acknowledging" in str(caught.value)
    assert "injected 503" in str(caught.value)
    assert "another writer" not in str(caught.value)
    lead.close()


def test_a_records_lost_whose_slot_was_freed_under_it_is_planned_again(
    store: S3ObjectStore, topic: int
) -> None:
    lead = leader(store, 1)  # offset 0
    for i in range(5):
        append_placeholders(lead, 3, batch(i))  # offsets 1..5, records 0..4
    operator = open_replica(store)  # will plan slot 6
    put = operator.log.append_at
    raced = False

    def leader_compacts_first(slot: int, payload: bytes) -> bool:
        """Between the operator's plan and its put, the leader writes slot
        6, moves on, snapshots and truncates through it."""
        nonlocal raced
        if not raced:
            raced = True
            append_placeholders(lead, 3, batch(5))  # offset 6, record 5
            append_placeholders(lead, 3, batch(6))  # offset 7, record 6
            lead.advance_reconciled(lro=5, log_offset=6)  # offset 8
            assert lead.replica.write_snapshot()
            assert lead.replica.truncate() == 7  # offsets 0..6: slot 6 is free again
        return put(slot, payload)

    operator.log.append_at = leader_compacts_first  # type: ignore[method-assign]

    def through_the_last_record(replica: PartitionReplica) -> RecordsLost:
        state = replica.state
        command, _ = plan_skip(
            state, replica.retained, state.next_offset - 1, by="op", reason="lost", now=NOW
        )
        return command

    entry = operator.append_records_lost(through_the_last_record)

    fresh = open_replica(store)
    assert fresh.lost, (
        f"records_lost reported applied at log offset {entry.offset}, "
        "below the snapshot, where no reader replays it"
    )
    assert entry.offset > 8
    assert fresh.state.lro == 6
    lead.close()
