"""Test helper: append one ``placeholders`` command through a partition
leader, as the leader service does for a producer's upload, without the
service's fence and queue (tests that drive the log directly)."""

from __future__ import annotations

from collections.abc import Sequence

from epochgc.errors import StaleEpochError
from epochgc.watermarks.partition.commands import PlaceholderBatch, Placeholders
from epochgc.watermarks.partition.replica import AppliedEntry, PartitionLeader
from epochgc.watermarks.partition.state import Outcome


def append_placeholders(
    leader: PartitionLeader, epoch: int, batches: Sequence[PlaceholderBatch]
) -> AppliedEntry:
    """Append one ``placeholders`` of ``batches`` at ``epoch``.

    Raises:
        StaleEpochError: the apply-time check rejected the epoch.
    """
    entry = leader.append_all([Placeholders(0, 0, epoch, tuple(batches))])[0]
    if entry.result.outcome is Outcome.REJECTED_STALE_EPOCH:
        window = leader.replica.applied_window()
        raise StaleEpochError(epoch, window.previous, window.max)
    return entry
