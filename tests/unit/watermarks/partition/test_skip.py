"""Planning ``partition skip``: which range a loss record may cover."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import InvalidArgumentError
from epochgc.watermarks.partition.codec import RetainedPlaceholder
from epochgc.watermarks.partition.commands import (
    AdvanceEpoch,
    AdvanceReconciled,
    PlaceholderBatch,
    Placeholders,
    TermStart,
)
from epochgc.watermarks.partition.skip import plan_skip
from epochgc.watermarks.partition.state import Outcome, PartitionState, apply

NOW = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
# Placeholders at log offsets 1, 2, 4 (3 is an advance_epoch) holding
# records 0..1, 2..4, 5; lro 1 (the first one is reconciled).
RETAINED = (
    RetainedPlaceholder(1, 0, 1),
    RetainedPlaceholder(2, 2, 4),
    RetainedPlaceholder(4, 5, 5),
)
STATE = dataclasses.replace(
    PartitionState.new(2),
    term=3,
    lro=1,
    next_offset=6,
    applied_log_offset=5,
    reconciled_log_offset=1,
)


def plan(through: int) -> tuple[int, int, int]:
    command, covered = plan_skip(STATE, RETAINED, through, by="op", reason="gone", now=NOW)
    assert command.term == 3 and (command.by, command.reason, command.ts) == ("op", "gone", NOW)
    assert [r.log_offset for r in covered] == [
        r.log_offset for r in RETAINED if r.last_record > STATE.lro and r.first_record <= through
    ]
    return command.first, command.last, command.log_offset


def test_the_range_starts_above_lro_and_reconciled_offset_stops_below_the_next_placeholder() -> (
    None
):
    assert plan(4) == (2, 4, 3), "log offset 3: just below the placeholder of record 5"
    assert plan(5) == (2, 5, 5), "nothing left: the log end"


@pytest.mark.parametrize(
    ("through", "message"),
    [
        (1, "nothing to skip"),
        (0, "nothing to skip"),
        (6, "never written"),
        (3, r"inside the placeholder of records 2\.\.4: skip through 4"),
    ],
)
def test_refusals_name_the_reason(through: int, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        plan_skip(STATE, RETAINED, through, by="op", reason="gone", now=NOW)


def test_a_log_without_the_placeholders_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="no retained placeholder starts at record 2"):
        plan_skip(STATE, RETAINED[2:], 5, by="op", reason="gone", now=NOW)


@given(st.integers(-3, 8))
def test_a_planned_loss_is_always_applied_as_planned(through: int) -> None:
    """Whatever the operator asks, either the plan is refused or the state
    machine applies it at the next log offset, moving lro to ``through``."""
    try:
        command, _ = plan_skip(STATE, RETAINED, through, by="op", reason="gone", now=NOW)
    except InvalidArgumentError:
        return
    result = apply(STATE, command, STATE.applied_log_offset + 1)
    assert result.outcome is Outcome.APPLIED
    assert result.state.lro == through
    assert result.state.reconciled_log_offset == command.log_offset


@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3), st.booleans()), min_size=2),
    st.data(),
)
def test_skips_keep_every_placeholder_after_them_above_m(
    steps: list[tuple[int, int, bool]], data: st.DataObject
) -> None:
    """The invariant of docs/architecture.md ("Why it is safe, in short")
    through the planner: after a reconciled prefix
    and a planned skip, every placeholder that is neither reconciled nor
    lost has an epoch above ``M(p)``. ``plan_skip`` computes the
    ``log_offset`` the state machine trusts, so this is where an
    over-claim would let ``M`` pass unreconciled data."""
    state = apply(PartitionState.new(2), TermStart(1), 0).state
    retained: list[RetainedPlaceholder] = []
    epoch, seq = 2, 0
    for bump, records, slide_after in steps:
        epoch += bump
        seq += 1
        offset = state.applied_log_offset + 1
        placed = apply(
            state, Placeholders(1, seq, epoch, (PlaceholderBatch("k", 0, 1, records),)), offset
        )
        assert placed.first_record_offset is not None
        first = placed.first_record_offset
        retained.append(RetainedPlaceholder(offset, first, first + records - 1, 1, epoch))
        state = placed.state
        if slide_after:
            epoch += 1
            seq += 1
            state = apply(state, AdvanceEpoch(1, seq, epoch), state.applied_log_offset + 1).state
    done = data.draw(st.integers(0, len(retained) - 1), label="reconciled placeholders")
    if done:
        following = retained[done].log_offset - 1
        seq += 1
        reconciled = AdvanceReconciled(1, seq, retained[done - 1].last_record, following)
        state = apply(state, reconciled, state.applied_log_offset + 1).state
    lost = data.draw(st.integers(1, len(retained) - done), label="lost placeholders")
    through = retained[done + lost - 1].last_record
    command, covered = plan_skip(state, retained, through, by="op", reason="gone", now=NOW)
    assert covered == retained[done : done + lost]
    result = apply(state, command, state.applied_log_offset + 1)
    assert result.outcome is Outcome.APPLIED
    for placeholder in retained[done + lost :]:
        assert placeholder.epoch > result.state.safe_epoch, (placeholder, result.state)
