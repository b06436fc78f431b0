"""An operator's ``records_lost`` entry: ``epochgc partition skip``
(docs/operating.md, "Stuck partitions"), against the bucket.

``plan_records_lost`` shows what would be recorded before anything is: the
entry (``watermarks.partition.skip.plan_skip``, pure), the placeholders it
covers, and the L0 objects they point into with whether each is still
there, so an operator can see a wrong range (every object present) before
giving records up for good. ``record_records_lost`` appends it, planned
again against the state it lands on. Nothing here decides to skip: only
the operator does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from epochgc.reconciler.fetch import pending_placeholders
from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore, head_or_none
from epochgc.watermarks.partition.commands import RecordsLost
from epochgc.watermarks.partition.replica import AppliedEntry, PartitionReplica
from epochgc.watermarks.partition.skip import plan_skip


@dataclass(frozen=True)
class SkipPlan:
    """Recording records ``command.first..command.last`` of a partition as
    lost: the entry to append and what it gives up."""

    partition: PartitionId
    command: RecordsLost
    placeholders: int
    """The placeholders the range covers (whole ones only)."""
    l0_objects: dict[str, bool]
    """The L0 objects those placeholders point into (in key order), and
    whether each is present."""

    @property
    def records(self) -> int:
        return self.command.last - self.command.first + 1


def plan_records_lost(
    store: ObjectStore,
    replica: PartitionReplica,
    through: int,
    *,
    by: str,
    reason: str,
    now: datetime,
) -> SkipPlan:
    """Plan recording records ``lro+1..through`` of an opened replica as
    lost; write nothing.

    Raises:
        InvalidArgumentError: from ``plan_skip`` (nothing to skip, ...).
        CorruptLogError: a placeholder's log entry is missing.
        StorageError: the store could not be read.
    """
    command, covered = plan_skip(
        replica.state, replica.retained, through, by=by, reason=reason, now=now
    )
    placeholders = pending_placeholders(replica, replica.state.lro)
    keys = sorted(
        {b.l0_key for p in placeholders if p.last_record <= command.last for b in p.batches}
    )
    return SkipPlan(replica.pid, command, len(covered), {key: _exists(store, key) for key in keys})


def record_records_lost(
    replica: PartitionReplica, through: int, *, by: str, reason: str, now: datetime
) -> AppliedEntry:
    """Append the ``records_lost`` entry of ``lro+1..through``, planned
    again against the state it lands on (``append_records_lost``).

    Raises:
        InvalidArgumentError: nothing is left to skip (another operator did).
        FencedError: the slot stayed contested.
    """
    return replica.append_records_lost(
        lambda r: plan_skip(r.state, r.retained, through, by=by, reason=reason, now=now)[0]
    )


def _exists(store: ObjectStore, key: str) -> bool:
    return head_or_none(store, key) is not None
