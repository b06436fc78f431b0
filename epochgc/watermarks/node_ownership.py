"""One node's partition ownership, round by round (docs/operating.md,
"Nodes, ownership and balance"): read the cluster (``cluster_view``), decide
(``ownership.plan_round``), write (``owner_store``).

A node owns a partition while the record names its current incarnation and
its node lease is valid on its own clock: ``owned()`` is empty the moment
the lease runs out, whatever the records say. A record we wrote that shows
another ETag in a later listing was taken from us (our lease must have
lapsed in the taker's eyes): it is dropped at once. A hand-back stops
treating the partition as owned before the release is sent.

The reconciler (``reconciler/node.py``) leads exactly ``owned()``, each
partition at the record's term: the partition log's ``term_start`` carries
it, and fences a deposed owner's late appends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from epochgc.errors import EpochGCError
from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.cluster_view import ClusterView
from epochgc.watermarks.node_lease import NodeLease
from epochgc.watermarks.owner_store import OwnershipStore
from epochgc.watermarks.ownership import AssignmentCache, MoveKind, OwnerRecord, plan_round

log = logging.getLogger("epochgc.watermarks.node_ownership")


@dataclass(frozen=True)
class RoundReport:
    """What one ownership round did (for logs, metrics and the benchmark)."""

    taken: int = 0
    taken_over: int = 0
    handed_back: int = 0
    lost: int = 0
    """Records we held that someone else now holds."""
    conflicts: int = 0
    """Moves someone else won first."""
    deferred: int = 0
    owned: int = 0
    list_pages: int = 0
    gets: int = 0
    skipped: str = ""
    """Why the round did nothing (no valid lease, a storage error)."""


class NodeOwnership:
    """Takes, keeps and hands back this node's partitions.

    Example::

        ownership = NodeOwnership(store, "epochgc", lease, max_moves_per_round=64)
        report = ownership.run_round(live_partitions)   # every round
        ownership.owned()                               # lead these
        ownership.stop()                                # release all, then the lease
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        lease: NodeLease,
        *,
        max_moves_per_round: int,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        assignments: AssignmentCache | None = None,
    ) -> None:
        if max_moves_per_round < 1:
            raise ValueError(f"max_moves_per_round must be >= 1, got {max_moves_per_round}")
        self._lease = lease
        self._max_moves = max_moves_per_round
        self._monotonic = monotonic
        self.view = ClusterView(
            store,
            root,
            lease.policy.ttl_seconds,
            monotonic,
            now,
            assignments or AssignmentCache(),
        )
        self._owners = OwnershipStore(store, root, now=now)
        self._mine: dict[PartitionId, OwnerRecord] = {}
        self._incarnation = ""
        self.totals: dict[str, int] = {"taken": 0, "taken_over": 0, "handed_back": 0, "lost": 0}

    @property
    def node_id(self) -> str:
        return self._lease.node_id

    @property
    def lease(self) -> NodeLease:
        return self._lease

    def start(self) -> None:
        """Start the node lease's heartbeat (the lease itself is taken by
        ``ensure_lease``, from the rounds)."""
        self._lease.start()

    def ensure_lease(self) -> bool:
        """Hold the node lease, taking it if needed; ``False`` while another
        incarnation still holds it (a previous process of this node id that
        was killed: it goes after a TTL of silence).

        Raises:
            StorageError, RecordError: the lease object could not be read.
        """
        return self._lease.try_acquire()

    def raise_term(self, pid: PartitionId, above: int) -> int | None:
        """Move our record of ``pid`` to a term above ``above`` (the highest
        term its partition log holds); the new term, or ``None`` when the
        partition is not ours any more.

        Raises:
            StorageError: the store failed (outcome unknown: the next
                listing shows it).
        """
        held = self._mine.get(pid)
        if held is None or pid not in self.owned():
            return None
        raised = self._owners.raise_term(pid, held, max(above, held.term) + 1)
        if raised is None:
            del self._mine[pid]
            self.totals["lost"] += 1
            return None
        self._mine[pid] = raised
        self.view.remember(pid, raised)
        return raised.term

    def owned(self) -> frozenset[PartitionId]:
        """Partitions this node owns now (empty without a valid lease)."""
        if not self._lease.is_valid() or self._lease.incarnation != self._incarnation:
            return frozenset()
        return frozenset(self._mine)

    def term(self, pid: PartitionId) -> int | None:
        """Our term of ``pid`` while we own it."""
        if pid not in self.owned():
            return None
        return self._mine[pid].term

    def run_round(self, partitions: Collection[PartitionId]) -> RoundReport:
        """One round: refresh, plan, write. Storage errors skip the round
        (logged); nothing is assumed about writes whose answer was lost
        beyond what the next listing shows."""
        if not self._lease.is_valid():
            self._mine.clear()
            return RoundReport(skipped="node lease not valid")
        if self._lease.incarnation != self._incarnation:
            self._mine.clear()  # a new incarnation owns nothing until it takes it
            self._incarnation = self._lease.incarnation
        me, incarnation = self._lease.node_id, self._incarnation
        try:
            state = self.view.refresh(me, incarnation, partitions, self._mine)
        except EpochGCError as err:
            log.warning("ownership round skipped: cluster state unreadable: %s", err)
            return RoundReport(owned=len(self.owned()), skipped=str(err))
        lost = 0
        for pid in [p for p in self._mine if p not in partitions]:
            del self._mine[pid]  # its topic incarnation is gone (the janitor deletes the record)
        for pid, held in list(self._mine.items()):
            if state.listed.get(pid) != held.etag:
                del self._mine[pid]
                lost += 1
                log.warning("partition %s is no longer ours (its record changed)", pid)
        plan = plan_round(
            me, incarnation, state.live, state.records, state.desired, max_moves=self._max_moves
        )
        counts = {"taken": 0, "taken_over": 0, "handed_back": 0, "conflicts": 0}
        for move in plan.moves:
            if move.pid in state.unreadable:
                continue
            if not self._lease.is_valid():
                break  # out of time: a later write could act on a lapsed lease
            try:
                done = self._apply(move.kind, move.pid, move.record, me, incarnation)
            except EpochGCError as err:
                log.warning("ownership move %s of %s failed: %s", move.kind.value, move.pid, err)
                counts["conflicts"] += 1
                continue
            if done:
                counts[_COUNTER[move.kind]] += 1
            else:
                counts["conflicts"] += 1
        for name in ("taken", "taken_over", "handed_back"):
            self.totals[name] += counts[name]
        self.totals["lost"] += lost
        return RoundReport(
            taken=counts["taken"],
            taken_over=counts["taken_over"],
            handed_back=counts["handed_back"],
            lost=lost,
            conflicts=counts["conflicts"],
            deferred=plan.deferred,
            owned=len(self.owned()),
            list_pages=state.list_pages,
            gets=state.gets,
        )

    def _apply(
        self,
        kind: MoveKind,
        pid: PartitionId,
        seen: OwnerRecord | None,
        me: str,
        incarnation: str,
    ) -> bool:
        if kind is MoveKind.HAND_BACK:
            held = self._mine.pop(pid, None)  # stop leading before the release is sent
            if held is None:
                return False
            released = self._owners.release(pid, held)
            if released is not None:
                self.view.remember(pid, released)
            return released is not None
        taken = self._owners.take(pid, seen, me, incarnation)
        if taken is None:
            return False
        self._mine[pid] = taken
        self.view.remember(pid, taken)
        if kind is MoveKind.TAKE_OVER and seen is not None:
            log.info("took over %s from %s at term %d", pid, seen.node, taken.term)
        return True

    def stop(self, *, release: bool = True) -> None:
        """Stop the heartbeat; release every record we hold, then the node
        lease: the other nodes take our partitions at their next round.
        Best effort. ``release=False`` is a kill -9: nothing is released,
        the others take over after a TTL of silence."""
        if not release:
            self._lease.stop(release=False)
            self._mine.clear()
            return
        self._lease.stop(release=False)
        for pid, held in list(self._mine.items()):
            del self._mine[pid]
            try:
                self._owners.release(pid, held)
            except EpochGCError as err:
                log.warning("could not release %s on stop (it goes after a TTL): %s", pid, err)
        self._lease.release()


_COUNTER = {
    MoveKind.TAKE: "taken",
    MoveKind.TAKE_OVER: "taken_over",
    MoveKind.HAND_BACK: "handed_back",
}
