"""The partition state machine (docs/architecture.md, "Life of an L0 object"
and "Why it is safe, in short"). Pure: no I/O, no clock.

A partition's state is the fold of its log's commands over a snapshot. Every
command is deterministic, idempotent and only ratchets forward, so replaying
the log from any snapshot yields the same state.

Why ``M(p) = min_epoch_lower_bound - 1`` is safe, rule by rule:

1. *Apply-time check.* ``placeholders`` is rejected when its epoch is below
   ``previous_applied_epoch``. Fencing happens before the append, so a write
   admitted under an old window can land after the window moved; without
   this check it could be accepted with an epoch ``<= M(p)``.
2. *The window_offset gate.* ``min_epoch_lower_bound`` moves only once
   every placeholder up to ``window_offset`` (the log offset where
   ``max_applied_epoch`` last rose) is reconciled. Placeholders after that
   offset all carry epochs ``>= previous_applied_epoch`` (rule 1 and the
   window not having moved since), so the unreconciled ones are covered.
3. *previous, not max.* The new lower bound is ``previous_applied_epoch``:
   placeholders between the last two window slides may carry it, and
   ``max_applied_epoch`` would put them at or below ``M(p)``.

A ``records_lost`` entry (an operator's ``partition skip``) counts the lost
records as reconciled: the same rule 2 applies, with the lost placeholders
counted as done, so every unreconciled placeholder that is not lost still
has an epoch above ``M(p)``.

``SafetyRules`` lets a test switch each rule off to prove the property tests
can catch its absence; production code never passes anything but the
default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from epochgc.watermarks.partition.commands import (
    AdvanceEpoch,
    AdvanceReconciled,
    Command,
    Placeholders,
    RecordsLost,
    SequencedCommand,
    SetAllowedLocalStartOffset,
    TermStart,
)


@dataclass(frozen=True)
class SafetyRules:
    """Test-only switches for the three safety rules; all must stay True."""

    apply_time_check: bool = True
    window_offset_gate: bool = True
    lower_bound_from_previous: bool = True


SAFE = SafetyRules()


class Outcome(Enum):
    """What applying one log entry did."""

    APPLIED = "applied"
    """The command took effect (possibly as a no-op, e.g. an older epoch)."""
    REJECTED_STALE_EPOCH = "rejected_stale_epoch"
    """A ``placeholders`` whose epoch is below the applied window."""
    REJECTED_INVALID = "rejected_invalid"
    """Inconsistent arguments (reconciling past the log end, ...)."""
    IGNORED_STALE_TERM = "ignored_stale_term"
    """Written under a term older than the newest ``term_start``."""
    IGNORED_UNSTARTED_TERM = "ignored_unstarted_term"
    """Written under a term whose ``term_start`` was never applied."""
    IGNORED_OUT_OF_SEQUENCE = "ignored_out_of_sequence"
    """Not the leader's next ``seq``: a duplicate, or an entry that landed
    behind a slot another writer stole (the leader replays it in order)."""


@dataclass(frozen=True)
class PartitionState:
    """The durable fields of one partition (docs/architecture.md, "Life of an
    L0 object").

    Record offsets (``lro``, ``start_offset``, ``next_offset``,
    ``allowed_local_start_offset``) number records; log offsets
    (``window_offset``, ``reconciled_log_offset``, ``applied_log_offset``)
    number entries of the partition log.
    """

    revision: int
    max_applied_epoch: int
    previous_applied_epoch: int
    window_offset: int
    min_epoch_lower_bound: int
    lro: int
    reconciled_log_offset: int
    start_offset: int
    next_offset: int
    allowed_local_start_offset: int | None
    term: int
    last_seq: int
    applied_log_offset: int

    @staticmethod
    def new(revision: int) -> PartitionState:
        """A fresh partition of a topic created at controller offset ``revision``.

        ``M(p) = revision - 1`` and any write older than the topic is rejected.
        """
        if revision < 0:
            raise ValueError(f"revision must be >= 0, got {revision}")
        return PartitionState(
            revision=revision,
            max_applied_epoch=revision,
            previous_applied_epoch=revision,
            window_offset=-1,
            min_epoch_lower_bound=revision,
            lro=-1,
            reconciled_log_offset=-1,
            start_offset=0,
            next_offset=0,
            allowed_local_start_offset=None,
            term=0,
            last_seq=0,
            applied_log_offset=-1,
        )

    @property
    def safe_epoch(self) -> int:
        """``M(p)``: the highest epoch this partition will never need again."""
        return self.min_epoch_lower_bound - 1

    @property
    def is_fully_reconciled(self) -> bool:
        """Every record written so far is in L1."""
        return self.lro == self.next_offset - 1


@dataclass(frozen=True)
class ApplyResult:
    """The state after one entry, what happened, and for an accepted
    ``placeholders`` the first record offset it was given."""

    state: PartitionState
    outcome: Outcome
    first_record_offset: int | None = None


def apply(
    state: PartitionState, command: Command, log_offset: int, rules: SafetyRules = SAFE
) -> ApplyResult:
    """Fold one log entry (at ``log_offset``) into ``state``.

    Entries at or below ``applied_log_offset`` were folded already and leave
    the state unchanged, which makes replay from any snapshot idempotent.

    Raises:
        ValueError: ``log_offset`` skips ahead (the log has a hole).
    """
    if log_offset <= state.applied_log_offset:
        return ApplyResult(state, Outcome.APPLIED)
    if log_offset != state.applied_log_offset + 1:
        raise ValueError(
            f"log offset {log_offset} skips ahead of applied offset {state.applied_log_offset}"
        )
    advanced = dataclasses.replace(state, applied_log_offset=log_offset)
    if isinstance(command, TermStart):
        if command.term <= state.term:
            return ApplyResult(advanced, Outcome.IGNORED_STALE_TERM)
        return ApplyResult(
            dataclasses.replace(advanced, term=command.term, last_seq=0), Outcome.APPLIED
        )
    if command.term < state.term:
        return ApplyResult(advanced, Outcome.IGNORED_STALE_TERM)
    if command.term > state.term:
        return ApplyResult(advanced, Outcome.IGNORED_UNSTARTED_TERM)
    if isinstance(command, RecordsLost):
        return _apply_records_lost(advanced, command, log_offset, rules)
    if command.seq != state.last_seq + 1:
        return ApplyResult(advanced, Outcome.IGNORED_OUT_OF_SEQUENCE)
    sequenced = dataclasses.replace(advanced, last_seq=command.seq)
    return _apply_in_term(sequenced, command, log_offset, rules)


def _apply_in_term(
    state: PartitionState, command: SequencedCommand, log_offset: int, rules: SafetyRules
) -> ApplyResult:
    if isinstance(command, Placeholders):
        if rules.apply_time_check and command.epoch < state.previous_applied_epoch:
            return ApplyResult(state, Outcome.REJECTED_STALE_EPOCH)
        first = state.next_offset
        moved = dataclasses.replace(state, next_offset=first + command.record_count)
        return ApplyResult(_advance_epoch(moved, command.epoch, log_offset), Outcome.APPLIED, first)
    if isinstance(command, AdvanceEpoch):
        return ApplyResult(_advance_epoch(state, command.epoch, log_offset), Outcome.APPLIED)
    if isinstance(command, AdvanceReconciled):
        if command.lro >= state.next_offset or command.log_offset >= log_offset:
            return ApplyResult(state, Outcome.REJECTED_INVALID)
        return ApplyResult(
            _advance_reconciled(state, command.lro, command.log_offset, rules), Outcome.APPLIED
        )
    if isinstance(command, SetAllowedLocalStartOffset):
        hint = command.offset
        if hint is not None and hint > state.next_offset:
            return ApplyResult(state, Outcome.REJECTED_INVALID)
        return ApplyResult(
            dataclasses.replace(state, allowed_local_start_offset=hint), Outcome.APPLIED
        )
    if command.offset > state.next_offset:
        return ApplyResult(state, Outcome.REJECTED_INVALID)
    start = max(state.start_offset, command.offset)
    return ApplyResult(dataclasses.replace(state, start_offset=start), Outcome.APPLIED)


def _advance_epoch(state: PartitionState, epoch: int, log_offset: int) -> PartitionState:
    """Slide the applied window when ``epoch`` is new; otherwise no change."""
    if epoch <= state.max_applied_epoch:
        return state
    return dataclasses.replace(
        state,
        previous_applied_epoch=state.max_applied_epoch,
        max_applied_epoch=epoch,
        window_offset=log_offset,
    )


def _apply_records_lost(
    state: PartitionState, command: RecordsLost, log_offset: int, rules: SafetyRules
) -> ApplyResult:
    """Lost records count as reconciled. Only the range right above ``lro``
    is accepted: a loss recorded against a stale view (``lro`` moved since,
    the object came back and was reconciled) is rejected, never stretched."""
    if (
        command.first != state.lro + 1
        or command.last < command.first
        or command.last >= state.next_offset
        or command.log_offset >= log_offset
    ):
        return ApplyResult(state, Outcome.REJECTED_INVALID)
    return ApplyResult(
        _advance_reconciled(state, command.last, command.log_offset, rules), Outcome.APPLIED
    )


def _advance_reconciled(
    state: PartitionState, new_lro: int, new_log_offset: int, rules: SafetyRules
) -> PartitionState:
    lro = max(state.lro, new_lro)
    reconciled = max(state.reconciled_log_offset, new_log_offset)
    lower = state.min_epoch_lower_bound
    gate_open = state.window_offset <= reconciled or not rules.window_offset_gate
    if gate_open:
        candidate = (
            state.previous_applied_epoch
            if rules.lower_bound_from_previous
            else state.max_applied_epoch
        )
        lower = max(lower, candidate)
    return dataclasses.replace(
        state, lro=lro, reconciled_log_offset=reconciled, min_epoch_lower_bound=lower
    )


def replay(
    state: PartitionState,
    entries: list[tuple[int, Command]],
    rules: SafetyRules = SAFE,
) -> PartitionState:
    """Fold ``(log_offset, command)`` entries in order."""
    for offset, command in entries:
        state = apply(state, command, offset, rules).state
    return state
