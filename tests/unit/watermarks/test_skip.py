"""Planning ``partition skip``: which range a loss record may cover."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import InvalidArgumentError
from epochgc.watermarks.records import RetainedPlaceholder
from epochgc.watermarks.skip import plan_skip
from epochgc.watermarks.state import Outcome, PartitionState, apply

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
