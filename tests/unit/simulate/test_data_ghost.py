"""The simulation's ghost of the data path: which records are durable in
L1, and the invariants judged from it."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.simulate.cluster import Violation
from epochgc.simulate.data_path import AppliedChunk, DataGhost, _Coverage
from epochgc.simulate.memory_store import MemoryStore
from epochgc.simulate.simulated_store import EPOCH_ORIGIN
from epochgc.storage.keys import PartitionId, encode_l0_key, encode_l1_key

ROOT = "epochgc"
PID = PartitionId("orders", 1, 0)
L0 = encode_l0_key(ROOT, 1, 7, "00000000-0000-4000-8000-000000000001")
OTHER_L0 = encode_l0_key(ROOT, 2, 7, "00000000-0000-4000-8000-000000000002")


def l1_key(first: int, last: int) -> str:
    return encode_l1_key(ROOT, PID, first, last, "00000000-0000-4000-8000-0000000000aa")


ranges = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8)), max_size=12)


@given(ranges, st.integers(0, 70), st.integers(0, 10))
@settings(max_examples=300, deadline=None)
def test_coverage_covers_exactly_the_offsets_added(
    added: list[tuple[int, int]], first: int, length: int
) -> None:
    coverage = _Coverage()
    offsets: set[int] = set()
    for lo, span in added:
        coverage.add(lo, lo + span)
        offsets.update(range(lo, lo + span + 1))
    last = first + length
    assert coverage.covers(first, last) == all(o in offsets for o in range(first, last + 1))
    assert all(lo <= hi for lo, hi in coverage.ranges)
    assert all(a[1] + 1 < b[0] for a, b in zip(coverage.ranges, coverage.ranges[1:], strict=False))


class SetClock:
    """A wall clock the test sets."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


def ghost_with_chunk(first: int = 10, last: int = 12) -> DataGhost:
    ghost = DataGhost(ROOT, Violation, ended=lambda _pid: False)
    ghost.chunk_applied(AppliedChunk(PID, first, last, L0, "node-1#1"))
    return ghost


def test_deleting_an_object_whose_applied_records_are_not_in_l1_is_a_violation() -> None:
    ghost = ghost_with_chunk()
    ghost.landed(l1_key(0, 11))  # one record short
    with pytest.raises(Violation) as caught:
        ghost.deleted((L0,), "collector")
    assert caught.value.invariant == "deleted too soon"
    assert "records 10..12 of orders/0@1" in caught.value.detail


def test_deleting_once_every_record_landed_in_l1_is_fine() -> None:
    ghost = ghost_with_chunk()
    ghost.landed(l1_key(0, 9))
    ghost.landed(l1_key(10, 20))
    ghost.deleted((L0, OTHER_L0, f"{ROOT}/meta/reports/node-1"), "collector")
    assert ghost.deleted_l0 == 2


def test_a_record_neither_in_l1_nor_in_a_stored_object_is_lost() -> None:
    ghost = ghost_with_chunk()
    ghost.check_readable(lambda key: key == L0)  # still there: readable from L0
    with pytest.raises(Violation) as caught:
        ghost.check_readable(lambda key: False)
    assert caught.value.invariant == "record lost"
    ghost.landed(l1_key(10, 12))
    ghost.check_readable(lambda key: False)


def test_records_of_an_incarnation_a_delete_ended_are_no_longer_promised() -> None:
    ended: set[PartitionId] = set()
    ghost = DataGhost(ROOT, Violation, ended=ended.__contains__)
    ghost.chunk_applied(AppliedChunk(PID, 10, 12, L0, "node-1#1"))
    ended.add(PID)
    ghost.deleted((L0,), "collector")
    ghost.check_readable(lambda key: False)


def test_m_must_pass_the_epoch_the_faults_ended_at() -> None:
    store = MemoryStore(SetClock(EPOCH_ORIGIN))
    ghost = DataGhost(ROOT, Violation, ended=lambda _pid: False)
    ghost.faults_ended(40)
    ghost.collector_round(600.0, 39)
    with pytest.raises(Violation) as caught:
        ghost.check_collected(store, 700.0)
    assert caught.value.invariant == "M stalled"
    ghost.collector_round(690.0, 40)
    ghost.check_collected(store, 700.0)


def test_an_object_at_or_below_an_m_two_rounds_old_must_be_gone() -> None:
    clock = SetClock(EPOCH_ORIGIN + timedelta(seconds=100))
    store = MemoryStore(clock)
    old = encode_l0_key(ROOT, 0, 30, "00000000-0000-4000-8000-000000000003")
    store.put(old, b"x")  # stamped at 100 s
    clock.at = EPOCH_ORIGIN + timedelta(seconds=660)
    young = encode_l0_key(ROOT, 0, 31, "00000000-0000-4000-8000-000000000004")
    store.put(young, b"x")  # stamped after the round that allowed it
    ghost = DataGhost(ROOT, Violation, ended=lambda _pid: False)
    ghost.collector_round(650.0, 31)
    ghost.collector_round(670.0, 31)  # too recent to be owed by the end
    with pytest.raises(Violation) as caught:
        ghost.check_collected(store, 680.0)
    assert caught.value.invariant == "not collected"
    assert old in caught.value.detail
    store.delete(old)
    ghost.check_collected(store, 680.0)  # the young one is not owed yet
