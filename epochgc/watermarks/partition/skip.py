"""Planning an operator's ``partition skip`` (docs/operating.md,
"Stuck partitions"). Pure.

A partition stuck on a missing or corrupt L0 object can only move on once
someone says, explicitly and on the record, that its records are gone.
``plan_skip`` turns "skip through record OFFSET" into the ``records_lost``
entry to append, or refuses with the reason. The range always starts right
above ``lro`` and ends at the end of a placeholder: the reconciler moves
whole placeholders, and a half-lost placeholder would leave records that
nothing can read nor reconcile.

``log_offset`` follows the reconciler's rule: just below the next
placeholder that still holds records, or the log end when none is left, so
every placeholder at or below it is reconciled or lost and the state
machine's window gate (section 5) still holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from epochgc.errors import InvalidArgumentError
from epochgc.watermarks.partition.codec import RetainedPlaceholder
from epochgc.watermarks.partition.commands import RecordsLost
from epochgc.watermarks.partition.state import PartitionState


def plan_skip(
    state: PartitionState,
    retained: Sequence[RetainedPlaceholder],
    through: int,
    *,
    by: str,
    reason: str,
    now: datetime,
) -> tuple[RecordsLost, list[RetainedPlaceholder]]:
    """The ``records_lost`` entry recording records ``lro+1..through`` as
    lost, and the placeholders it covers.

    Raises:
        InvalidArgumentError: nothing to skip (``through <= lro``), records
            never written (``through >= next_offset``), ``through`` inside a
            placeholder, or no retained placeholder holds the range.
    """
    first = state.lro + 1
    if through < first:
        raise InvalidArgumentError(
            f"nothing to skip: records up to {state.lro} are already reconciled "
            f"(--through must be at least {first})"
        )
    if through >= state.next_offset:
        raise InvalidArgumentError(
            f"record {through} was never written (next offset {state.next_offset})"
        )
    covered = [r for r in retained if r.last_record >= first and r.first_record <= through]
    if not covered or covered[0].first_record != first:
        raise InvalidArgumentError(
            f"no retained placeholder starts at record {first}: the log does not hold the "
            "records to skip"
        )
    end = covered[-1]
    if end.last_record != through:
        raise InvalidArgumentError(
            f"record {through} is inside the placeholder of records "
            f"{end.first_record}..{end.last_record}: skip through {end.last_record}"
            + (f" or {end.first_record - 1}" if end.first_record - 1 >= first else "")
        )
    following = [r.log_offset for r in retained if r.log_offset > end.log_offset]
    log_offset = following[0] - 1 if following else state.applied_log_offset
    command = RecordsLost(
        term=state.term,
        first=first,
        last=through,
        log_offset=log_offset,
        reason=reason,
        by=by,
        ts=now,
    )
    return command, covered
