"""Hypothesis stateful test of the partition state machine's safety.

A model leader fences producers' (possibly stale) epochs against its seen
window, appends placeholders (an admitted write may land much later: the
fence-then-append race), the epoch ticks, a reconciler advances, idle
housekeeping slides the window, the leader restarts from a snapshot or
leadership changes (old-term writes may still land), an operator records
the oldest unreconciled placeholders as lost (``records_lost``, possibly
from a stale view or under an old term). After every step:

* ``M(p)`` never decreases;
* every placeholder is accepted only with epoch ``> M(p)``;
* every accepted placeholder that is neither reconciled nor lost has epoch
  ``> M(p)`` (lost ones count as done: that is what lets ``M`` move);
* replaying the log from scratch, and from any snapshot, gives the state.

The mutant tests switch off each of the three safety rules of
docs/architecture.md ("Why it is safe, in short") in turn and require
this machine to find a violation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from epochgc.watermarks.partition.commands import (
    AdvanceEpoch,
    AdvanceReconciled,
    Command,
    PlaceholderBatch,
    Placeholders,
    RecordsLost,
    TermStart,
)
from epochgc.watermarks.partition.state import (
    SAFE,
    Outcome,
    PartitionState,
    SafetyRules,
    apply,
    replay,
)
from epochgc.watermarks.partition.window import EpochWindow, Position

REVISION = 3
BATCH = (PlaceholderBatch("l0/obj", 0, 10, 1),)
TS = datetime(2026, 11, 24, tzinfo=UTC)


@dataclass
class PendingWrite:
    """A write admitted by the fence whose append has not landed yet."""

    term: int
    epoch: int


class PartitionModel(RuleBasedStateMachine):
    rules_under_test: SafetyRules = SAFE

    def __init__(self) -> None:
        super().__init__()
        self.cluster_epoch = REVISION
        self.log: list[Command] = []
        self.state = PartitionState.new(REVISION)
        self.term = 0
        self.seq: dict[int, int] = {}
        self.pending: list[PendingWrite] = []
        self.accepted: dict[int, int] = {}  # log offset -> epoch
        self.reconciled: set[int] = set()
        self.lost: set[int] = set()
        self.snapshots: list[PartitionState] = [self.state]
        self.highest_m = self.state.safe_epoch
        self.window = EpochWindow(REVISION, REVISION)
        self._new_term()

    # --- helpers ---------------------------------------------------------------

    def _append(self, command: Command) -> Outcome:
        offset = len(self.log)
        self.log.append(command)
        before = self.state
        result = apply(self.state, command, offset, self.rules_under_test)
        self.state = result.state
        if isinstance(command, Placeholders) and result.outcome is Outcome.APPLIED:
            assert command.epoch > before.safe_epoch, "accepted an epoch <= M(p)"
            assert command.epoch > self.state.safe_epoch, "accepted an epoch <= M(p)"
            self.accepted[offset] = command.epoch
        return result.outcome

    def _next_seq(self, term: int) -> int:
        self.seq[term] = self.seq.get(term, 0) + 1
        return self.seq[term]

    def _new_term(self) -> None:
        self.term += 1
        self._append(TermStart(self.term))
        self.window = EpochWindow(self.state.previous_applied_epoch, self.state.max_applied_epoch)

    def _fence(self, epoch: int) -> bool:
        position = self.window.position(epoch)
        if position is Position.BELOW:
            return False
        if position is Position.ABOVE:
            self.window = self.window.slide(epoch)
        return True

    def _unreconciled(self) -> list[int]:
        return sorted(o for o in self.accepted if o not in self.reconciled)

    # --- rules -------------------------------------------------------------------

    @rule(step=st.integers(1, 3))
    def tick(self, step: int) -> None:
        self.cluster_epoch += step

    @rule(lag=st.integers(0, 2))
    def fence(self, lag: int) -> None:
        """A producer whose epoch cache lags ``lag`` epochs asks to write."""
        epoch = max(REVISION, self.cluster_epoch - lag)
        if self._fence(epoch):
            self.pending.append(PendingWrite(self.term, epoch))

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def land(self, data: st.DataObject) -> None:
        """An admitted write lands, possibly long after it was fenced and
        possibly from a deposed leader (an older term)."""
        index = data.draw(st.integers(0, len(self.pending) - 1))
        write = self.pending.pop(index)
        self._append(Placeholders(write.term, self._next_seq(write.term), write.epoch, BATCH))

    @rule(count=st.integers(0, 4))
    def reconcile(self, count: int) -> None:
        """Reconcile the oldest ``count`` unreconciled placeholders (log
        order) and report the log offset just below the next one."""
        todo = self._unreconciled()
        done, rest = todo[:count], todo[count:]
        self.reconciled.update(done)
        log_offset = (rest[0] - 1) if rest else len(self.log) - 1
        reconciled_records = sum(1 for o in self.accepted if o in self.reconciled)
        lro = reconciled_records - 1
        self._append(AdvanceReconciled(self.term, self._next_seq(self.term), lro, log_offset))

    @rule(count=st.integers(1, 3))
    def skip(self, count: int) -> None:
        """An operator records the oldest ``count`` unreconciled placeholders
        as lost (``partition skip``): under the term it saw, no ``seq``,
        ``log_offset`` just below the next placeholder still holding
        records."""
        todo = self._unreconciled()
        if not todo:
            return
        lost, rest = todo[:count], todo[count:]
        first = self.state.lro + 1
        log_offset = (rest[0] - 1) if rest else len(self.log) - 1
        command = RecordsLost(self.term, first, first + len(lost) - 1, log_offset, "r", "op", TS)
        assert self._append(command) is Outcome.APPLIED
        self.reconciled.update(lost)
        self.lost.update(lost)

    @rule(data=st.data())
    def stale_skip(self, data: st.DataObject) -> None:
        """A loss planned against an older view (``lro`` moved since) or
        written under an older term changes nothing."""
        state = self.state
        if state.lro + 1 >= state.next_offset:
            return
        old_term = data.draw(st.booleans()) and self.term > 1
        term = self.term - 1 if old_term else self.term
        first = state.lro + 1 if old_term else data.draw(st.integers(0, max(0, state.lro)))
        if not old_term and first == state.lro + 1:
            return
        command = RecordsLost(term, first, state.next_offset - 1, len(self.log) - 1, "r", "op", TS)
        outcome = self._append(command)
        assert outcome in (Outcome.REJECTED_INVALID, Outcome.IGNORED_STALE_TERM), outcome
        assert dataclasses.replace(self.state, applied_log_offset=state.applied_log_offset) == (
            state
        )

    @rule()
    def housekeeping(self) -> None:
        """The leader slides the window to the cluster epoch with
        ``advance_epoch``. The real leader does this only for idle, fully
        reconciled partitions; safety must not depend on that, so the model
        may do it at any time."""
        if self._fence(self.cluster_epoch):
            epoch = self.cluster_epoch
            self._append(AdvanceEpoch(self.term, self._next_seq(self.term), epoch))

    @rule(restart=st.booleans())
    def change_leader(self, restart: bool) -> None:
        """A new term: another node takes over (the old leader's admitted
        writes may still land under its old term), or the leader process
        restarts (state rebuilt from the latest snapshot plus the log)."""
        if restart:
            latest = self.snapshots[-1]
            start = latest.applied_log_offset + 1
            self.state = replay(latest, list(enumerate(self.log))[start:], self.rules_under_test)
        self._new_term()

    # --- invariants ---------------------------------------------------------------

    @invariant()
    def take_snapshot(self) -> None:
        """Every state is a snapshot some replica could have written."""
        if self.snapshots[-1] != self.state:
            self.snapshots.append(self.state)

    @invariant()
    def safe_epoch_never_decreases(self) -> None:
        assert self.state.safe_epoch >= self.highest_m, "M(p) decreased"
        self.highest_m = self.state.safe_epoch

    @invariant()
    def unreconciled_placeholders_are_above_m(self) -> None:
        for offset in self._unreconciled():
            assert self.accepted[offset] > self.state.safe_epoch, (
                f"unreconciled placeholder at log offset {offset} with epoch "
                f"{self.accepted[offset]} <= M(p) = {self.state.safe_epoch}"
            )

    @invariant()
    def replay_from_any_snapshot_gives_the_same_state(self) -> None:
        entries = list(enumerate(self.log))
        fresh = replay(PartitionState.new(REVISION), entries, self.rules_under_test)
        assert fresh == self.state
        samples = (self.snapshots[0], self.snapshots[len(self.snapshots) // 2], self.snapshots[-1])
        for snap in samples:
            start = snap.applied_log_offset + 1
            assert replay(snap, entries[start:], self.rules_under_test) == self.state
            # Replaying entries the snapshot already covers changes nothing.
            assert replay(snap, entries[:start], self.rules_under_test) == snap


SETTINGS = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

TestPartitionSafety = PartitionModel.TestCase
TestPartitionSafety.settings = SETTINGS


def _mutant(rules: SafetyRules) -> type[PartitionModel]:
    return type("Mutant", (PartitionModel,), {"rules_under_test": rules})


@pytest.mark.parametrize(
    "rule_off",
    ["apply_time_check", "window_offset_gate", "lower_bound_from_previous"],
)
def test_removing_any_safety_rule_is_caught(rule_off: str) -> None:
    broken = dataclasses.replace(SAFE, **{rule_off: False})
    mutant_settings = settings(
        max_examples=3000,
        stateful_step_count=40,
        deadline=None,
        derandomize=True,
        # Stop at the first violation: this test only needs one, not the
        # smallest, and shrinking would dominate its run time.
        phases=[Phase.generate],
        report_multiple_bugs=False,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    with pytest.raises(BaseException) as info:
        run_state_machine_as_test(_mutant(broken), settings=mutant_settings)
    failures = _flatten(info.value)
    assert any(isinstance(f, AssertionError) and "M(p)" in str(f) for f in failures), failures


def _flatten(error: BaseException) -> list[BaseException]:
    """Hypothesis reports several distinct failures as an exception group."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _flatten(inner)]
    return [error]
