"""One node's partition ownership, round by round (docs/operating.md,
"Nodes, ownership and balance"): read the cluster (``cluster_view``), decide
(``ownership.plan_round``), write (``owner_store``).

A node owns a partition while the record names its current incarnation and
its node lease is valid on its own clock: ``owned()`` is empty the moment
the lease runs out, whatever the records say. A record we wrote that shows
another ETag when it is read again was taken from us (our lease must have
lapsed in the taker's eyes): it is dropped at once. A hand-back stops
treating the partition as owned before the release is sent.

The reconciler (``reconciler/node.py``) leads exactly ``owned()``, each
partition at the record's term: the partition log's ``term_start`` carries
it, and fences a deposed owner's late appends.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

from epochgc.errors import EpochGCError
from epochgc.leases.holder_codec import ASSIGNMENT_VERSION
from epochgc.leases.node_lease import NodeLease
from epochgc.ownership.assignment import (
    AssignmentCache,
    Move,
    MoveKind,
    OwnerRecord,
    is_owned_by,
    plan_round,
)
from epochgc.ownership.cluster_view import ClusterView, side_by_side
from epochgc.ownership.owner_records import OwnershipStore
from epochgc.runtime import SYSTEM, RequestPool, Runtime
from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore

log = logging.getLogger(__name__)


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
    next_stale_at: float | None = None
    """Monotonic time at which another node, silent since, would be judged
    dead: the caller runs its next round then if that comes before the
    regular one, so a killed node's partitions wait for the TTL, not for
    the TTL plus the rest of a round."""
    nodes: int = 0
    """Node leases in the round's listing: how many peers may look again at
    the same ``next_stale_at`` (``ownership/pacing``)."""
    records_read: bool = True
    """False: a settled round that listed the nodes only (nothing it could
    see changed since the records were read)."""
    read: str = ""
    """Which records were read (``ClusterState.read``: ``all`` or
    ``changes``); empty when none were."""
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
        runtime: Runtime = SYSTEM,
        assignments: AssignmentCache | None = None,
        request_concurrency: int = 8,
        requests: RequestPool | None = None,
        relist_records_seconds: float = 60.0,
        use_store_timestamps: bool = True,
    ) -> None:
        """``requests`` runs a round's GETs and conditional writes side by
        side (default: the runtime's pool of ``request_concurrency``; 1: one
        after another). ``use_store_timestamps``: judge when a peer's lease
        was written from the store's stamps too (``ClusterView.answered_at``;
        ``runtime`` must be the lease's)."""
        if max_moves_per_round < 1:
            raise ValueError(f"max_moves_per_round must be >= 1, got {max_moves_per_round}")
        self._lease = lease
        self._max_moves = max_moves_per_round
        self._settled = False
        """The last refresh found this node's share exactly its own, with
        nothing to move, lose or read again: until the nodes or the
        partitions change (or the records are due to be read again, every
        ``relist_records_seconds``), a round lists the nodes only. Cleared by anything that may
        have changed a record of ours."""
        self._monotonic = runtime.monotonic
        self._requests = requests or runtime.request_pool(request_concurrency, "ownership-request")
        self.view = ClusterView(
            store,
            root,
            lease.policy.ttl_seconds,
            runtime.monotonic,
            assignments or AssignmentCache(),
            relist_records_seconds,
            self._requests,
            answered_at=lease.answered_at if use_store_timestamps else None,
        )
        self._owners = OwnershipStore(store, root, now=runtime.wall)
        self._unsettled: set[PartitionId] = set()
        """Partitions whose last write failed without an answer: it may have
        landed. Their records are read at the next refresh whatever the
        assignment says, so one that names us is adopted (and led, or handed
        back) instead of staying ours on paper with nobody leading it."""
        self._mine: dict[PartitionId, OwnerRecord] = {}
        """Copy-on-write: readers (``owned``, ``term``: every append's
        guard, from any thread) take the reference and never lock; writers
        replace the dict under ``_writes``."""
        self._writes = runtime.lock()
        self._stopped = False
        self._incarnation = ""
        self._assignment_version = ASSIGNMENT_VERSION
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

    def raise_term(self, pid: PartitionId, above: int, *, wait_seconds: float = -1.0) -> int | None:
        """Move our record of ``pid`` to a term above ``above`` (the highest
        term its partition log holds); the new term, or ``None`` when the
        partition is not ours any more, or when an ownership round has held
        the records for ``wait_seconds`` (negative: as long as it takes).

        The caller is the node's other loop (leading what it owns): a round
        hung in the store must not hang that loop too, or the node's
        watchdog would name the wrong loop. ``None`` there means "not now";
        the partition stays unled until the caller tries again.

        Raises:
            StorageError: the store failed (outcome unknown: the next
                refresh reads the record, whatever the assignment says).
        """
        if not self._writes.acquire(timeout=wait_seconds):
            log.info(
                "%s: an ownership round has held the records for %gs; raising the term of %s "
                "waits for a later try",
                self.node_id,
                wait_seconds,
                pid,
            )
            return None
        try:
            return self._raise_term(pid, above)
        finally:
            self._writes.release()

    def _raise_term(self, pid: PartitionId, above: int) -> int | None:
        held = self._mine.get(pid)
        if held is None or pid not in self.owned():
            return None
        try:
            raised = self._owners.raise_term(pid, held, max(above, held.term) + 1)
        except EpochGCError:
            # It may have landed: the record may name us at a term we do
            # not know. Read it at the next refresh whatever the share says
            # (adopted if ours), or it stays ours on paper, led by nobody.
            self._unsettle(pid)
            raise
        if raised is None:
            # Changed under us: by a taker, or by an earlier raise of ours
            # that landed unanswered; only a read tells which.
            self._unsettle(pid)
            self._drop(pid)
            self.totals["lost"] += 1
            return None
        self._set(pid, raised)
        return raised.term

    def _unsettle(self, pid: PartitionId) -> None:
        """Read ``pid``'s record at the next refresh, whatever the
        assignment says (its last write of ours has an unknown outcome)."""
        self._unsettled.add(pid)
        self._settled = False

    def _set(self, pid: PartitionId, record: OwnerRecord) -> None:
        mine = dict(self._mine)
        mine[pid] = record
        self._mine = mine

    def _drop(self, pid: PartitionId) -> OwnerRecord | None:
        mine = dict(self._mine)
        held = mine.pop(pid, None)
        self._mine = mine
        return held

    def _note_version(self, version: int) -> None:
        """Say when the assignment version changes: a cluster computes an
        older one while a node of an older release is live (an upgrade in
        progress), and its CPU cost grows with nodes times partitions."""
        if version != self._assignment_version:
            log.info(
                "computing ownership assignment version %d (this node's newest: %d)%s",
                version,
                ASSIGNMENT_VERSION,
                "" if version == ASSIGNMENT_VERSION else ": a live node runs an older release",
            )
            self._assignment_version = version

    def owned(self) -> frozenset[PartitionId]:
        """Partitions this node owns now (empty without a valid lease)."""
        if not self._lease.is_valid() or self._lease.incarnation != self._incarnation:
            return frozenset()
        return frozenset(self._mine)  # one reference read: never a dict changing under us

    def term(self, pid: PartitionId) -> int | None:
        """Our term of ``pid`` while we own it."""
        if not self._lease.is_valid() or self._lease.incarnation != self._incarnation:
            return None
        held = self._mine.get(pid)
        return None if held is None else held.term

    def run_round(self, partitions: Collection[PartitionId]) -> RoundReport:
        """One round: refresh, plan, write. Storage errors skip the round
        (logged); nothing is assumed about writes whose answer was lost
        beyond what the next refresh reads. Rounds, ``raise_term`` and
        ``stop`` are serialized; ``owned`` and ``term`` never wait."""
        with self._writes:
            return self._run_round(partitions)

    def _run_round(self, partitions: Collection[PartitionId]) -> RoundReport:
        if not self._lease.is_valid():
            # Owns nothing meanwhile (``owned`` checks the lease). Kept: a
            # renewal in flight may land and restore the same incarnation,
            # whose records these still are; a re-acquisition is a new
            # incarnation and starts from nothing (below).
            return RoundReport(skipped="node lease not valid")
        if self._lease.incarnation != self._incarnation:
            self._mine = {}  # a new incarnation owns nothing until it takes it
            self._incarnation = self._lease.incarnation
            self._settled = False
        me, incarnation = self._lease.node_id, self._incarnation
        parts = frozenset(partitions)
        quiet_pages = quiet_gets = 0
        listing = None
        try:
            if self._settled:
                quiet = self.view.unchanged_since_listing(me, parts)
                if quiet.unchanged:
                    return RoundReport(
                        owned=len(self.owned()),
                        list_pages=quiet.list_pages,
                        gets=quiet.gets,
                        next_stale_at=quiet.next_stale_at,
                        nodes=self.view.listed_nodes,
                        records_read=False,
                    )
                quiet_pages, quiet_gets, listing = quiet.list_pages, quiet.gets, quiet.nodes
            self._settled = False
            state = self.view.refresh(
                me, incarnation, parts, self._mine, self._unsettled, nodes=listing
            )
        except EpochGCError as err:
            log.warning("ownership round skipped: cluster state unreadable: %s", err)
            return RoundReport(owned=len(self.owned()), skipped=str(err))
        self._unsettled = set()  # their records were read (and adopted below if ours)
        self._note_version(state.assignment_version)
        lost = 0
        for pid in [p for p in self._mine if p not in partitions]:
            self._drop(pid)  # its topic incarnation is gone (the janitor deletes the record)
        for pid, held in list(self._mine.items()):
            if pid in state.observed and state.etags.get(pid) != held.etag:
                self._drop(pid)
                lost += 1
                log.warning("partition %s is no longer ours (its record changed)", pid)
        for pid, record in state.records.items():
            if is_owned_by(record, me, incarnation) and pid not in self._mine:
                # Ours as written (e.g. a take whose answer was lost): adopt
                # it, or it would stay owned on paper and led by nobody.
                self._set(pid, record)
        plan = plan_round(
            me, incarnation, state.live, state.records, state.desired, max_moves=self._max_moves
        )
        counts = {"taken": 0, "taken_over": 0, "handed_back": 0, "conflicts": 0}
        moves = [m for m in plan.moves if m.pid not in state.unreadable]
        handing = {
            m.pid: self._drop(m.pid)  # stop leading before the release is sent
            for m in moves
            if m.kind is MoveKind.HAND_BACK
        }

        # The writes are independent CAS requests: several at once, so a
        # round of a hundred moves costs a few round trips, not a hundred.
        def write(m: Move) -> OwnerRecord | EpochGCError | None:
            return self._write(m, handing.get(m.pid), me, incarnation)

        results = side_by_side(self._requests, write, moves)
        for move, result in zip(moves, results, strict=True):
            if isinstance(result, EpochGCError):
                log.warning("ownership move %s of %s failed: %s", move.kind.value, move.pid, result)
                self._unsettled.add(move.pid)
                counts["conflicts"] += 1
            elif result is None:
                counts["conflicts"] += 1
            else:
                self._applied(move, result)
                counts[_COUNTER[move.kind]] += 1
        for name in ("taken", "taken_over", "handed_back"):
            self.totals[name] += counts[name]
        self.totals["lost"] += lost
        own_share = {p for p, n in state.desired.items() if n == me}
        self._settled = (
            not plan.moves
            and not plan.deferred
            and not lost
            and not self._unsettled
            and set(self._mine) == own_share
        )
        return RoundReport(
            taken=counts["taken"],
            taken_over=counts["taken_over"],
            handed_back=counts["handed_back"],
            lost=lost,
            conflicts=counts["conflicts"],
            deferred=plan.deferred,
            owned=len(self.owned()),
            list_pages=quiet_pages + state.list_pages,
            gets=quiet_gets + state.gets,
            next_stale_at=state.next_stale_at,
            nodes=self.view.listed_nodes,
            read=state.read,
        )

    def _write(
        self, move: Move, held: OwnerRecord | None, me: str, incarnation: str
    ) -> OwnerRecord | EpochGCError | None:
        """One move's conditional write (in a writer thread): the record
        written, ``None`` when someone else moved first (or the lease ran
        out before it could be sent), or the storage error."""
        if not self._lease.is_valid():
            return None  # out of time: a write now could act on a lapsed lease
        try:
            if move.kind is MoveKind.HAND_BACK:
                return None if held is None else self._owners.release(move.pid, held)
            return self._owners.take(move.pid, move.record, me, incarnation)
        except EpochGCError as err:
            return err

    def _applied(self, move: Move, written: OwnerRecord) -> None:
        if move.kind is MoveKind.HAND_BACK:
            return
        self._set(move.pid, written)
        if move.kind is MoveKind.TAKE_OVER and move.record is not None:
            log.info("took over %s from %s at term %d", move.pid, move.record.node, written.term)

    def stop(self, *, release: bool = True) -> None:
        """Stop the heartbeat; release every record we hold, then the node
        lease: the other nodes take our partitions at their next round.
        Best effort. ``release=False`` is a kill -9: nothing is released,
        the others take over after a TTL of silence. Only the first call
        counts (a kill is not undone by a later clean stop)."""
        self._lease.stop(release=False)
        with self._writes:
            if self._stopped:
                return
            self._stopped = True
            held, self._mine = self._mine, {}
            if not release:
                return
            for pid, record in held.items():
                try:
                    self._owners.release(pid, record)
                except EpochGCError as err:
                    log.warning("could not release %s on stop (it goes after a TTL): %s", pid, err)
            self._lease.release()


_COUNTER = {
    MoveKind.TAKE: "taken",
    MoveKind.TAKE_OVER: "taken_over",
    MoveKind.HAND_BACK: "handed_back",
}
