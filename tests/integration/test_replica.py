"""Partition replicas: replay, snapshots, recovery, truncation, holes."""

from __future__ import annotations

import asyncio

import pytest

from epochgc.errors import StaleEpochError
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.partition.codec import decode_command, encode_command
from epochgc.watermarks.partition.commands import Placeholders, TermStart
from epochgc.watermarks.partition.fence import EpochFence
from epochgc.watermarks.partition.window import EpochWindow
from tests.support.placeholders import (
    append_placeholders,
    batch,
    create_orders,
    leader,
    open_replica,
)

ROOT = "epochgc"


@pytest.fixture
def topic(store: S3ObjectStore) -> int:
    return create_orders(store)  # revision 2


def test_replay_matches_the_leaders_state(store: S3ObjectStore, topic: int) -> None:
    lead = leader(store, 1)
    for epoch in (2, 3, 3, 5):
        append_placeholders(lead, epoch, batch(epoch, records=2))
    lead.advance_reconciled(lro=3, log_offset=2)
    assert open_replica(store).state == lead.replica.state
    assert lead.replica.state.next_offset == 8


def test_snapshot_and_recovery_collapse_the_seen_window(store: S3ObjectStore, topic: int) -> None:
    lead = leader(store, 1)
    append_placeholders(lead, 3, batch(1))
    append_placeholders(lead, 4, batch(2))
    seen = EpochFence(lead.replica.applied_window())

    async def fence_ahead() -> None:
        async with seen.admit(9):  # fenced but never appended
            pass

    asyncio.run(fence_ahead())
    assert seen.window == EpochWindow(4, 9)
    assert lead.replica.write_snapshot()
    recovered = open_replica(store)
    assert recovered.state == lead.replica.state
    assert recovered.applied_window() == EpochWindow(3, 4), "the seen window is volatile"
    fence = EpochFence(recovered.applied_window())

    async def stale() -> None:
        with pytest.raises(StaleEpochError):
            await fence.acquire(2)
        async with fence.admit(3):
            pass

    asyncio.run(stale())


def test_a_new_leader_never_accepts_below_previous_applied(
    store: S3ObjectStore, topic: int
) -> None:
    first = leader(store, 1)
    for epoch in (3, 4, 5):
        append_placeholders(first, epoch, batch(epoch))
    second = leader(store, 2)
    assert second.replica.applied_window() == EpochWindow(4, 5)
    with pytest.raises(StaleEpochError):
        append_placeholders(second, 3, batch(9))
    append_placeholders(second, 4, batch(10))


def test_truncation_follows_lro_and_the_retention_hint(store: S3ObjectStore, topic: int) -> None:
    lead = leader(store, 1)  # log offset 0: term_start
    for i in range(6):  # log offsets 1..6, records 0..11 (two each)
        append_placeholders(lead, 3, batch(i, records=2))
    lead.advance_reconciled(lro=7, log_offset=4)  # offset 7: records 0..7 in L1
    lead.set_allowed_local_start_offset(4)  # offset 8: keep records >= 4 locally
    replica = lead.replica
    assert replica.write_snapshot()
    deleted = replica.truncate()
    # Bound = min(lro + 1, hint) = 4: the placeholder holding records 4-5 is at offset 3.
    assert deleted == 3
    assert replica.log.read(0).entries == ()
    assert replica.log.read(3).entries[0].offset == 3
    # Clearing the hint truncates up to lro.
    lead.set_allowed_local_start_offset(None)
    replica.write_snapshot()
    assert replica.truncate() == 2  # offsets 3 and 4 (records 4..7)
    assert replica.log.read(5).entries[0].offset == 5
    # Never past lro: offsets 5 and 6 hold records 8..11, not reconciled.
    lead.advance_reconciled(lro=7, log_offset=4)
    replica.write_snapshot()
    assert replica.truncate() == 0
    reopened = open_replica(store)
    assert reopened.state == replica.state
    assert [r.log_offset for r in reopened.retained] == [5, 6]


def test_a_reader_behind_a_truncation_reloads_the_snapshot(
    store: S3ObjectStore, topic: int
) -> None:
    lead = leader(store, 1)
    follower = open_replica(store)
    for i in range(4):
        append_placeholders(lead, 3, batch(i))
    lead.advance_reconciled(lro=3, log_offset=4)
    lead.replica.write_snapshot()
    assert lead.replica.truncate() == 5
    follower.catch_up()
    assert follower.state == lead.replica.state


def test_a_new_leader_fills_a_hole_left_by_a_crashed_pipeline(
    store: S3ObjectStore, topic: int
) -> None:
    lead = leader(store, 1)  # offset 0
    append_placeholders(lead, 3, batch(0))  # offset 1
    # The old leader's pipeline wrote offsets 3 and 4 but crashed before 2.
    stale = lead.stamp  # keep stamping in term 1
    log = lead.replica.log
    seq_lost = stale(Placeholders(0, 0, 3, batch(1)))
    for offset, command in (
        (3, stale(Placeholders(0, 0, 3, batch(2)))),
        (4, stale(Placeholders(0, 0, 3, batch(3)))),
    ):
        assert log.append_at(offset, encode_command(command))
    assert seq_lost.seq == 2
    follower = open_replica(store)
    assert follower.hole == 2
    new = leader(store, 2)
    entries = new.replica.log.read(0).entries
    filled = decode_command(entries[2].payload)
    assert isinstance(filled, TermStart) and filled.term == 2, "term_start filled the hole"
    assert new.replica.state.next_offset == 1, "entries behind the hole were superseded"
    append_placeholders(new, 3, batch(4))
    assert open_replica(store).state.next_offset == 2


def test_periodic_snapshot_and_truncation(store: S3ObjectStore, topic: int) -> None:
    lead = leader(store, 1)
    for i in range(3):
        append_placeholders(lead, 3, batch(i))
    assert lead.maybe_snapshot(every_entries=10) == 0, "not yet"
    assert lead.replica.log.read_snapshot().covered_offset == -1  # type: ignore[union-attr]
    lead.advance_reconciled(lro=2, log_offset=3)  # offset 4
    for i in range(3, 9):
        append_placeholders(lead, 3, batch(i))  # offsets 5..10
    # Offsets 0..4 are covered and reconciled; 5..10 hold unreconciled records.
    assert lead.maybe_snapshot(every_entries=10) == 5
    assert lead.replica.log.read_snapshot().covered_offset == 10  # type: ignore[union-attr]
    assert open_replica(store).state == lead.replica.state
