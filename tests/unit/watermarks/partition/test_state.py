"""Partition state transitions, one rule at a time."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from epochgc.watermarks.partition.commands import (
    AdvanceEpoch,
    AdvanceReconciled,
    Command,
    PlaceholderBatch,
    Placeholders,
    RecordsLost,
    SetAllowedLocalStartOffset,
    SetStartOffset,
    TermStart,
)
from epochgc.watermarks.partition.state import Outcome, PartitionState, apply, replay

N = 10
BATCH = (PlaceholderBatch("k", 0, 5, 2),)
ONE = (PlaceholderBatch("k", 0, 5, 1),)
TS = datetime(2026, 11, 24, tzinfo=UTC)


class Log:
    """Appends commands at consecutive offsets and folds them."""

    def __init__(self, revision: int = N) -> None:
        self.state = PartitionState.new(revision)
        self.entries: list[tuple[int, Command]] = []
        self.seq = 0
        self.append(TermStart(1))

    def append(self, command: Command) -> Outcome:
        offset = len(self.entries)
        self.entries.append((offset, command))
        result = apply(self.state, command, offset)
        self.state = result.state
        return result.outcome

    def next(self) -> int:
        self.seq += 1
        return self.seq

    def write(self, epoch: int) -> Outcome:
        return self.append(Placeholders(1, self.next(), epoch, BATCH))

    def reconciled(self, lro: int, log_offset: int) -> Outcome:
        return self.append(AdvanceReconciled(1, self.next(), lro, log_offset))


def window(state: PartitionState) -> tuple[int, int]:
    return (state.previous_applied_epoch, state.max_applied_epoch)


def test_new_partition_is_pinned_at_its_revision() -> None:
    state = PartitionState.new(N)
    assert window(state) == (N, N)
    assert state.safe_epoch == N - 1
    assert (state.window_offset, state.reconciled_log_offset, state.lro) == (-1, -1, -1)


def test_window_slides_n_then_n_plus_1_then_n_plus_2() -> None:
    log = Log()
    assert log.write(N) is Outcome.APPLIED
    assert window(log.state) == (N, N)
    assert log.write(N + 1) is Outcome.APPLIED
    assert window(log.state) == (N, N + 1)
    assert log.state.window_offset == 2
    assert log.write(N + 2) is Outcome.APPLIED
    assert window(log.state) == (N + 1, N + 2)
    assert log.state.next_offset == 6


def test_apply_time_check_rejects_epochs_below_previous_applied() -> None:
    log = Log()
    log.write(N + 1)
    log.write(N + 2)
    before = log.state
    assert log.write(N) is Outcome.REJECTED_STALE_EPOCH
    assert log.state.next_offset == before.next_offset, "no records were assigned"
    assert log.write(N + 1) is Outcome.APPLIED, "previous_applied itself is inside"


def test_non_contiguous_epochs() -> None:
    log = Log(revision=5)
    log.write(6)
    log.write(10)
    assert window(log.state) == (6, 10)
    for epoch in (6, 7, 9, 10):
        assert log.write(epoch) is Outcome.APPLIED
    assert log.write(5) is Outcome.REJECTED_STALE_EPOCH


def test_lower_bound_waits_for_the_window_offset_gate() -> None:
    """min_epoch_lower_bound moves to previous_applied only once the log
    offset where the window last slid is reconciled (log offsets, not
    record offsets)."""
    log = Log()
    log.write(N + 1)  # offset 1, records 0-1, window [N, N+1]
    log.write(N + 2)  # offset 2, records 2-3, window [N+1, N+2], window_offset 2
    assert log.reconciled(lro=1, log_offset=1) is Outcome.APPLIED
    assert log.state.min_epoch_lower_bound == N, "gate closed: offset 2 unreconciled"
    assert log.state.safe_epoch == N - 1
    assert log.reconciled(lro=3, log_offset=2) is Outcome.APPLIED
    assert log.state.min_epoch_lower_bound == N + 1, "previous_applied, not max_applied"
    assert log.state.safe_epoch == N


def test_record_offsets_are_not_log_offsets() -> None:
    """lro covers record 3 (log offset 2's records) but the reconciler only
    vouches for log offset 1: the gate stays closed."""
    log = Log()
    log.write(N + 1)
    log.write(N + 2)
    log.reconciled(lro=3, log_offset=1)
    assert log.state.lro == 3
    assert log.state.min_epoch_lower_bound == N


def test_reconciled_progress_only_ratchets_forward() -> None:
    log = Log()
    log.write(N + 1)
    log.write(N + 2)
    log.reconciled(lro=3, log_offset=2)
    before = log.state
    log.reconciled(lro=0, log_offset=0)
    assert (log.state.lro, log.state.reconciled_log_offset) == (3, 2)
    assert log.state.min_epoch_lower_bound == before.min_epoch_lower_bound


@pytest.mark.parametrize(
    ("lro", "log_offset"),
    [(4, 1), (0, 3), (0, 99)],
)
def test_reconciling_the_future_is_rejected(lro: int, log_offset: int) -> None:
    log = Log()
    log.write(N + 1)
    log.write(N + 1)  # next_offset 4, log end 2
    assert log.reconciled(lro=lro, log_offset=log_offset) is Outcome.REJECTED_INVALID


def test_advance_epoch_slides_an_idle_partition() -> None:
    log = Log()
    assert log.append(AdvanceEpoch(1, log.next(), N + 5)) is Outcome.APPLIED
    assert window(log.state) == (N, N + 5)
    assert log.append(AdvanceEpoch(1, log.next(), N + 3)) is Outcome.APPLIED
    assert window(log.state) == (N, N + 5), "an older epoch changes nothing"
    log.reconciled(lro=-1, log_offset=2)
    assert log.state.safe_epoch == N - 1
    log.append(AdvanceEpoch(1, log.next(), N + 6))
    log.reconciled(lro=-1, log_offset=4)
    assert log.state.safe_epoch == N + 4


def test_terms_fence_old_leaders_and_sequence_numbers_drop_copies() -> None:
    log = Log()
    assert log.write(N) is Outcome.APPLIED  # term 1, seq 1
    assert log.append(TermStart(2)) is Outcome.APPLIED
    assert log.append(Placeholders(1, 2, N, BATCH)) is Outcome.IGNORED_STALE_TERM
    assert log.append(Placeholders(3, 1, N, BATCH)) is Outcome.IGNORED_UNSTARTED_TERM
    assert log.append(TermStart(2)) is Outcome.IGNORED_STALE_TERM
    assert log.append(Placeholders(2, 2, N, BATCH)) is Outcome.IGNORED_OUT_OF_SEQUENCE
    assert log.append(Placeholders(2, 1, N, BATCH)) is Outcome.APPLIED
    assert log.append(Placeholders(2, 1, N, BATCH)) is Outcome.IGNORED_OUT_OF_SEQUENCE
    assert log.state.next_offset == 4


def test_retention_fields() -> None:
    log = Log()
    log.write(N)
    assert log.append(SetAllowedLocalStartOffset(1, log.next(), 1)) is Outcome.APPLIED
    assert log.state.allowed_local_start_offset == 1
    assert log.append(SetAllowedLocalStartOffset(1, log.next(), None)) is Outcome.APPLIED
    assert log.state.allowed_local_start_offset is None
    assert log.append(SetStartOffset(1, log.next(), 2)) is Outcome.APPLIED
    assert log.append(SetStartOffset(1, log.next(), 1)) is Outcome.APPLIED
    assert log.state.start_offset == 2
    assert log.append(SetStartOffset(1, log.next(), 3)) is Outcome.REJECTED_INVALID


def test_replay_is_deterministic_and_idempotent() -> None:
    log = Log()
    for epoch in (N, N + 1, N + 1, N + 3):
        log.write(epoch)
    log.reconciled(lro=3, log_offset=2)
    fresh = replay(PartitionState.new(N), log.entries)
    assert fresh == log.state
    assert replay(fresh, log.entries) == fresh, "entries already applied are no-ops"
    middle = replay(PartitionState.new(N), log.entries[:3])
    assert replay(middle, log.entries) == log.state


def test_a_hole_in_the_log_is_an_error_not_a_skip() -> None:
    with pytest.raises(ValueError, match="skips ahead"):
        apply(PartitionState.new(N), TermStart(1), 1)


def test_state_is_immutable() -> None:
    state = PartitionState.new(N)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.term = 3  # type: ignore[misc]


def test_records_lost_counts_as_reconciled_behind_the_window_gate() -> None:
    """Two placeholders at epoch 3, the window slides to [4, 5]; losing the
    first alone must not lift M(p) past the second (still unreconciled,
    epoch 3), and losing both lets M(p) move to previous_applied - 1."""
    state = PartitionState.new(2)
    entries: list[tuple[int, Command]] = [
        (0, TermStart(1)),
        (1, Placeholders(1, 1, 3, ONE)),
        (2, Placeholders(1, 2, 3, ONE)),
        (3, AdvanceEpoch(1, 3, 4)),
        (4, AdvanceEpoch(1, 4, 5)),
    ]
    state = replay(state, entries)
    first_only = apply(state, RecordsLost(1, 0, 0, 1, "gone", "op", TS), 5)
    assert first_only.outcome is Outcome.APPLIED
    assert first_only.state.lro == 0 and first_only.state.safe_epoch < 3
    both = apply(first_only.state, RecordsLost(1, 1, 1, 5, "gone", "op", TS), 6)
    assert both.outcome is Outcome.APPLIED
    assert (both.state.lro, both.state.safe_epoch) == (1, 3)


@pytest.mark.parametrize(
    ("first", "last", "log_offset", "term", "outcome"),
    [
        (1, 1, 1, 1, Outcome.REJECTED_INVALID),  # not right above lro (-1)
        (0, 2, 1, 1, Outcome.REJECTED_INVALID),  # records never written
        (0, 0, 3, 1, Outcome.REJECTED_INVALID),  # claims its own log offset
        (0, 0, 1, 0, Outcome.IGNORED_STALE_TERM),
        (0, 0, 1, 2, Outcome.IGNORED_UNSTARTED_TERM),
        (0, 0, 1, 1, Outcome.APPLIED),
    ],
)
def test_records_lost_is_checked_against_the_state_it_lands_on(
    first: int, last: int, log_offset: int, term: int, outcome: Outcome
) -> None:
    state = replay(
        PartitionState.new(2),
        [(0, TermStart(1)), (1, Placeholders(1, 1, 3, ONE)), (2, Placeholders(1, 2, 3, ONE))],
    )
    result = apply(state, RecordsLost(term, first, last, log_offset, "gone", "op", TS), 3)
    assert result.outcome is outcome
    if outcome is not Outcome.APPLIED:
        assert result.state == dataclasses.replace(state, applied_log_offset=3)
    # A loss takes no seq: the leader's stream continues unchanged.
    assert result.state.last_seq == state.last_seq
