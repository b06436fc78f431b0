"""The rules a node's rounds apply to the partitions it leads, with no I/O
and no clock of their own (the caller passes what it measured).

A node leads exactly the partitions of live epochgc topics its ownership
gives it, each at the term its record holds, and steps down from one as
soon as any of that stops being true; a partition it leads that is fully
reconciled and whose ``M(p)`` has not moved for a while gets an
``advance_epoch``, so an idle partition does not pin ``M``. The node's
round (``leadership.py``, ``duties.py``) and the simulation's node
(``simulate/cluster.py``) both decide by these functions, so the seeds
check the rules production runs.
"""

from __future__ import annotations

from collections.abc import Collection, Set

from epochgc.storage.keys import PartitionId
from epochgc.watermarks.partition.state import PartitionState

TOPIC_GONE = "topic deleted or not epochgc's"
NOT_OWNED = "no longer owned"
LEADER_FAILED = "leader failed"


def step_down_reason(
    pid: PartitionId,
    *,
    led_term: int,
    owned_term: int | None,
    writer_open: bool,
    live: Collection[PartitionId],
) -> str | None:
    """Why the node must stop leading ``pid`` (led at ``led_term``; its
    ownership gives it ``owned_term`` now), or ``None`` to go on: its topic
    incarnation is gone, the record no longer gives the node that term, or
    the writer failed an append (its term is spent: leading again raises
    the record's term above it)."""
    if pid not in live:
        return TOPIC_GONE
    if owned_term != led_term:
        return NOT_OWNED
    if not writer_open:
        return LEADER_FAILED
    return None


def to_lead(
    owned: Set[PartitionId], led: Collection[PartitionId], live: Collection[PartitionId]
) -> frozenset[PartitionId]:
    """The partitions to start leading: owned, of a live topic, not led."""
    return frozenset(pid for pid in owned if pid in live and pid not in led)


def idle_advance_due(
    state: PartitionState, *, idle_for: float, idle_seconds: float, cluster_epoch: int
) -> bool:
    """Whether a led partition whose ``M(p)`` has not moved for
    ``idle_for`` seconds gets ``advance_epoch(cluster_epoch)``: every
    record it holds is reconciled (its lower bound may then move), it has
    been idle ``idle_seconds``, and the cluster is past the newest epoch
    it applied (else there is nothing to advance to)."""
    return (
        state.is_fully_reconciled
        and idle_for >= idle_seconds
        and cluster_epoch > state.max_applied_epoch
    )
