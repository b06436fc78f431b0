"""Partition logs under leader changes, compaction and late writes
(hypothesis stateful, on the in-memory CAS store).

A late write is a create-only put whose slot was chosen earlier: a deposed
leader's next append (it was paused between its lease check and its put)
or any stale writer's entry aimed just past a long-lived reader's view.
Truncation frees slots, so such puts can succeed below the snapshot. What
must hold whatever the interleaving:

* every acknowledged append is in the log a fresh reader replays (no two
  acknowledged appends share a record offset, each is below the replayed
  ``next_offset``, and one still in the log is the placeholder that was
  acknowledged: its byte length is unique to it);
* the current leader's state is the state a fresh reader replays;
* a long-lived reader, once caught up, has that state too.
"""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from epochgc.errors import FencedError
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import PartitionId
from epochgc.watermarks.partition.codec import encode_command
from epochgc.watermarks.partition.commands import PlaceholderBatch, Placeholders
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.state import Outcome
from epochgc.watermarks.partition.term_writer import TermWriter
from tests.support.placeholders import append_placeholders

ROOT = "epochgc"
PID = PartitionId("orders", 1, 0)
EPOCH = 3


class PartitionLateWrites(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        self.term = 0
        self.current = self._lead()
        self.deposed: list[TermWriter] = []
        self.acked: dict[int, int] = {}
        """Unique byte length of an acknowledged placeholder -> its record offset."""
        self.length = 0

    def _replica(self) -> PartitionReplica:
        replica = PartitionReplica(self.store, ROOT, PID)
        replica.open()
        return replica

    def _lead(self) -> TermWriter:
        self.term += 1
        leader = TermWriter(self._replica(), self.term, depth=2)
        leader.start()
        return leader

    def _batch(self) -> tuple[PlaceholderBatch, ...]:
        self.length += 1
        return (PlaceholderBatch(f"l0/{self.length}", 0, self.length, 1),)

    @initialize()
    def readers(self) -> None:
        self.followers = [self._replica(), self._replica()]

    @rule()
    def append(self) -> None:
        entry = append_placeholders(self.current, EPOCH, self._batch())
        assert entry.result.first_record_offset is not None
        self.acked[self.length] = entry.result.first_record_offset

    @rule()
    def reconcile_all(self) -> None:
        state = self.current.replica.state
        if state.lro < state.next_offset - 1:
            self.current.advance_reconciled(state.next_offset - 1, state.applied_log_offset)

    @rule()
    def compact(self) -> None:
        self.current.maybe_snapshot(every_entries=1)

    @rule()
    def take_over(self) -> None:
        """A new leader starts a term; the old one does not know yet."""
        self.deposed.append(self.current)
        self.current = self._lead()

    @rule(which=st.integers(0, 7))
    def deposed_leader_appends(self, which: int) -> None:
        """A deposed leader wakes up and appends at the slot it chose."""
        if not self.deposed:
            return
        old = self.deposed[which % len(self.deposed)]
        future = old.submit(Placeholders(0, 0, EPOCH, self._batch()))
        with contextlib.suppress(FencedError):
            entry = future.result(timeout=30)
            if entry.result.outcome is Outcome.APPLIED:
                assert entry.result.first_record_offset is not None
                self.acked[self.length] = entry.result.first_record_offset

    @rule(which=st.integers(0, 1))
    def stale_write_past_a_reader(self, which: int) -> None:
        """An entry that would apply in a reader's view, put at the slot
        that reader reads next (it lands only if that slot was freed)."""
        state = self.followers[which].state
        slot = state.applied_log_offset + 1
        if slot > self.current.replica.state.applied_log_offset:
            return  # at the tail it would be a writer of the current term: the leader
        stale = Placeholders(state.term, state.last_seq + 1, EPOCH, self._batch())
        self.current.replica.log.append_at(slot, encode_command(stale))

    @rule(which=st.integers(0, 1))
    def reader_catches_up(self, which: int) -> None:
        follower = self.followers[which]
        follower.catch_up()
        assert follower.state == self._replica().state, "a long-lived reader diverged"

    @invariant()
    def acknowledged_appends_are_replayed(self) -> None:
        fresh = self._replica()
        assert fresh.state == self.current.replica.state, "the leader's state is not the log's"
        offsets = list(self.acked.values())
        assert len(set(offsets)) == len(offsets), "two acknowledged appends share a record"
        assert all(r < fresh.state.next_offset for r in offsets)
        by_first_record = {p.first_record: p.byte_length for p in fresh.retained}
        for length, record in self.acked.items():
            if record in by_first_record:
                assert by_first_record[record] == length, (
                    f"record {record} was acknowledged for placeholder {length}, "
                    f"the log holds placeholder {by_first_record[record]}"
                )

    def teardown(self) -> None:
        for leader in [self.current, *self.deposed]:
            leader.close()


def test_acknowledged_appends_survive_late_writes_into_truncated_slots() -> None:
    run_state_machine_as_test(
        PartitionLateWrites,
        settings=settings(
            max_examples=60,
            derandomize=True,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
