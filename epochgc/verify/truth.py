"""The true ``M``, read from the partition logs rather than from the node
reports: what ``epochgc verify`` holds the published ``M`` against.

The reports are what is under test (a broken build publishes a wrong
``M(p)`` in them), so a check that takes its "true M" from the reports can
only find a deletion above a value the build computed itself. The logs are
the replicated state every ``M(p)`` is derived from: replaying a
partition's log gives its ``min_epoch_lower_bound``, whatever its leader
reports. In a correct build a report is never ahead of its log (``M(p)``
only grows, and a report is computed from the state at some earlier point
of that log), so a published ``M`` above the logs' ``M`` of a later moment
is unsafe, whether or not a collector acted on it and whether or not the
data it exposed happened to be reconciled before it went.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import ControllerView
from epochgc.watermarks.partition.replica import PartitionReplica


@dataclass(frozen=True)
class LoggedSafeEpoch:
    """``M`` as the partition logs give it, and the partitions at it."""

    safe_epoch: int
    pinning: tuple[PartitionId, ...]


def logged_safe_epoch(view: ControllerView, logged: Mapping[PartitionId, int]) -> LoggedSafeEpoch:
    """``M`` over ``view``'s partitions from their logs' ``M(p)``
    (``logged``), with the floor every partition starts at (its revision
    - 1) and the controller offset as the ceiling, exactly as the
    collector's join bounds the reported values. Pure.

    Raises:
        KeyError: a partition of ``view`` is missing from ``logged``.
    """
    values = {
        pid: max(logged[pid], topic.revision - 1)
        for topic in view.topics.values()
        for pid in topic.partition_ids()
    }
    if not values:
        return LoggedSafeEpoch(view.offset, ())
    lowest = min(values.values())
    pinning = tuple(sorted(pid for pid, value in values.items() if value == lowest))
    return LoggedSafeEpoch(min(view.offset, lowest), pinning)


class LogFollower:
    """Follows every live partition's log read-only: one replica each,
    opened once and caught up at every call (a few requests per partition,
    not a replay).

    Raises from ``safe_epochs``: whatever reading a log raises (a store
    error; the caller skips that sample).
    """

    def __init__(self, store: ObjectStore, root: str) -> None:
        self._store = store
        self._root = root
        self._replicas: dict[PartitionId, PartitionReplica] = {}

    def safe_epochs(self, view: ControllerView) -> dict[PartitionId, int]:
        """Each of ``view``'s partitions' ``M(p)`` as its log gives it now."""
        live = view.live_partitions()
        for gone in set(self._replicas) - live:
            del self._replicas[gone]
        epochs: dict[PartitionId, int] = {}
        for pid in sorted(live):
            replica = self._replicas.get(pid)
            if replica is None:
                replica = PartitionReplica(self._store, self._root, pid)
                replica.open()
                self._replicas[pid] = replica
            else:
                replica.catch_up()
            epochs[pid] = replica.state.safe_epoch
        return epochs
