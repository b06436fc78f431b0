"""The cluster as one node sees it: live nodes and the ownership records it
needs (docs/operating.md, "Nodes, ownership and balance").

Nodes are read by LIST (one page per 1000 nodes): their ETags are what
liveness rests on. Ownership records are only ever read by key, one GET per
record this node must judge, several side by side: a listing of every
record by every node after a change would be 100,000 LIST requests on one
prefix within a round at 100,000 partitions over 1,000 nodes, far beyond
the 5,500 reads a second S3 serves on a prefix. A refresh reads

* **everything this node must judge** (the records of its share and of
  the partitions it holds) at the first refresh of an incarnation, when
  the partitions change (a topic created or deleted), and every
  ``relist_seconds`` (plus a per-node offset of up to half of that, so
  nodes that started together do not read together): that is what notices
  a record changed by someone else, which only a lapsed lease or an
  operator can cause (partition terms keep that safe meanwhile);
* **the changes only** otherwise: the records of partitions that have
  become this node's own but are not held by it yet (and each whose last
  write lost its answer); the records it holds are the ones it wrote.
  After a node joins or leaves that is a handful of GETs per node.

Liveness never trusts a body's times: a node is live until its lease's
ETag was seen unchanged for a TTL on this process's monotonic clock
(``lease_timing.VersionWatch``), or its body says released. When this
node saw a lease change between two listings, the watch of the new version
starts no later than the store's stamps allow (``timing.written_by``: the
lease's LastModified against this node's own in the same listing), so a
renewal first seen a round after it was written does not put a round on
the failover; stamps that contradict what this node saw turn that off for
good (``timing.stamps_contradict``). Balance uses one more reading, store
times only (see ``_long_expired``). A node lease's
body is read when a record this node must judge names that node, the
ETag changed since its body was read (the node may have restarted with
another incarnation) and that ETag is not one already watched stale (a
dead node's incarnation does not matter), when its size changed since it was read (a release
adds the ``released`` field; also for a node whose body was never read,
against its size in the last listing), and otherwise on first sight, a bounded
number a refresh (``BODY_BURST_LIMIT``): a thousand nodes starting together
would otherwise send a million GETs to one prefix. Missing a body can only delay
a takeover, never cause one.

Records are always read before the node listing that judges their owners,
so a record written by a node that started after that listing cannot
appear; a record whose node is absent from the (later) node listing names
a node whose lease is gone. When every record read names this node (or is
released), there is no owner to judge and no second listing: a periodic
read of a settled node's records costs its GETs and one LIST page.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from epochgc.errors import RecordError
from epochgc.leases.holder_codec import (
    ASSIGNMENT_VERSION,
    NodeLeaseDocument,
    decode_node_lease,
    decode_owner,
)
from epochgc.leases.timing import (
    VersionWatch,
    stamps_checkable,
    stamps_contradict,
    written_by,
)
from epochgc.ownership.assignment import (
    UNKNOWN_INCARNATION,
    AssignmentCache,
    OwnerRecord,
)
from epochgc.runtime import RequestPool
from epochgc.storage.keys import (
    PartitionId,
    node_lease_key,
    nodes_prefix,
    owner_key,
    parse_node_lease_key,
)
from epochgc.storage.object_store import ObjectInfo, ObjectStore, StoredObject, get_or_none

log = logging.getLogger(__name__)

A = TypeVar("A")
T = TypeVar("T")


BODY_BURST_LIMIT = 10_000
"""Most node lease bodies the whole cluster reads at once only because the
node is new to the reader: a refresh reads at most ``BODY_BURST_LIMIT //
nodes`` of them (all of them up to 100 nodes; 10 a refresh at 1,000). A
thousand nodes starting together then send 10,000 GETs a round (2,000 a
second over 5 s rounds) to one prefix, not a million; each learns every
peer's assignment version within ``nodes**2 / BODY_BURST_LIMIT`` rounds
(see ``_assignment_version``)."""


@dataclass(frozen=True)
class ClusterState:
    """One refresh's view, as ``ownership.plan_round`` wants it."""

    live: dict[str, str]
    """Node id -> incarnation of every live node (this one included); one
    whose body could not be read is ``UNKNOWN_INCARNATION`` (protects all
    its records)."""
    desired: Mapping[PartitionId, str]
    records: dict[PartitionId, OwnerRecord]
    """Records this node must judge (desired for it, or named in ``mine``)."""
    etags: dict[PartitionId, str]
    """The ETag of every record this refresh read and found (readable)."""
    unreadable: frozenset[PartitionId]
    """Partitions whose record this version cannot read: never touched."""
    list_pages: int
    gets: int
    next_stale_at: float | None = None
    """Monotonic time at which the first live node whose lease has not
    changed since would be judged dead (``VersionWatch.next_stale_at``)."""
    assignment_version: int = ASSIGNMENT_VERSION
    """The version ``desired`` was computed with: the oldest one a node of
    the assignment advertises (older during a rolling upgrade)."""
    observed: frozenset[PartitionId] = frozenset()
    """The partitions whose record this refresh read (``etags`` is exact
    for them)."""
    read: str = "all"
    """Which records were read: ``all`` (everything this node must judge)
    or ``changes``."""


_UNREADABLE = OwnerRecord("", "", 1)
"""Sentinel: a record whose body does not parse."""


@dataclass(frozen=True)
class QuietCheck:
    """What ``unchanged_since_listing`` found, and what it cost."""

    unchanged: bool
    list_pages: int
    gets: int
    next_stale_at: float | None = None
    nodes: dict[str, ObjectInfo] | None = None
    """The node listing it made (``refresh`` starts from it)."""


@dataclass
class _Counters:
    list_pages: int = 0
    gets: int = 0


def node_fraction(node: str, purpose: str) -> float:
    """A stable number in [0, 1) for ``node``, different per ``purpose``:
    where in a shared window this node acts, so that a thousand nodes that
    would all act at one moment spread over it (the periodic re-reads; the
    early look at a silent lease, ``ownership/pacing``)."""
    digest = hashlib.blake2b(f"{purpose}\0{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass
class ClusterView:
    """Reads cluster state: nodes by LIST, records by key, with ETag-keyed
    body caches.

    Example::

        view = ClusterView(store, "epochgc", ttl_seconds=15.0, monotonic=time.monotonic)
        state = view.refresh("node-1", lease.incarnation, partitions, held={})
        plan = plan_round("node-1", lease.incarnation, state.live,
                          state.records, state.desired, max_moves=64)
    """

    store: ObjectStore
    root: str
    ttl_seconds: float
    monotonic: Callable[[], float]
    assignments: AssignmentCache = field(default_factory=AssignmentCache)
    relist_seconds: float = 60.0
    """How often (plus a per-node offset) every record this node must judge
    is read again (``[ownership] relist_records_seconds``; the name is from
    when this was a listing)."""
    requests: RequestPool | None = None
    """Where a refresh's GETs run side by side (``None``: one after
    another). A hundred GETs at 20 ms are two seconds in sequence."""
    body_burst_limit: int = BODY_BURST_LIMIT
    """See ``BODY_BURST_LIMIT``."""
    answered_at: Callable[[str], float | None] | None = None
    """When the answer to this node's own lease write with a given ETag
    arrived, on ``monotonic`` (``NodeLease.answered_at``): the reference
    the store's stamps are read against. ``None``: liveness from sightings
    only (``[ownership] use_store_timestamps = false``)."""
    _watch: VersionWatch = field(init=False)
    _node_bodies: dict[str, tuple[str, int, NodeLeaseDocument]] = field(default_factory=dict)
    """Node id -> (ETag, size, body) of the last body read."""
    _listed_sizes: dict[str, int] = field(default_factory=dict)
    """Node id -> the lease's size in the last node listing that judged
    it: a change is a release (or a restart) even of a node whose body
    this node has not read yet."""
    _unreadable: set[str] = field(default_factory=set)
    _listed_key: tuple[frozenset[str], frozenset[str], int, frozenset[PartitionId]] | None = None
    """Live nodes, assigned nodes, assignment version and partitions at the
    last refresh."""
    _full_read_at: float | None = None
    """Monotonic time the last read of everything began."""
    _full_read_partitions: frozenset[PartitionId] = frozenset()
    _listing_started: float | None = None
    """Monotonic time the last node listing began."""
    _judged_listing_started: float | None = None
    """When the last node listing judged began: it showed every version the
    watch holds."""
    _stamps_inconsistent: bool = False
    _released: frozenset[str] = frozenset()
    """Nodes whose lease the last listing judged showed released."""

    def __post_init__(self) -> None:
        self._watch = VersionWatch(self.ttl_seconds)

    def unchanged_since_listing(self, me: str, partitions: frozenset[PartitionId]) -> QuietCheck:
        """LIST the nodes only: whether the nodes the assignment is computed
        from and the partitions are what they were at the last ``refresh``,
        and no read of everything is due. The caller skips the refresh only
        when its own share was settled then (see ``NodeOwnership``).

        Raises:
            StorageError: the LIST or a GET failed.
        """
        counters = _Counters()
        if self._listed_key is None or self._full_read_due(me, partitions):
            return QuietCheck(False, 0, 0)
        node_infos = self._list_nodes(counters)
        self._read_node_bodies(me, node_infos, (), counters, first_sight=True)
        key = (*self._judge_nodes(me, node_infos), partitions)
        return QuietCheck(
            key == self._listed_key,
            counters.list_pages,
            counters.gets,
            self.next_stale_at(me),
            node_infos,
        )

    def _full_read_due(self, me: str, partitions: frozenset[PartitionId]) -> bool:
        if self._full_read_at is None or partitions != self._full_read_partitions:
            return True
        offset = node_fraction(me, "relist") * self.relist_seconds / 2
        return self.monotonic() - self._full_read_at >= self.relist_seconds + offset

    @property
    def listed_nodes(self) -> int:
        """Node leases in the last node listing judged."""
        return len(self._listed_sizes)

    def next_stale_at(self, me: str) -> float | None:
        """When the first other node still live would be judged dead if its
        lease stays unchanged (monotonic; ``None``: no other node). A
        released lease is not waited for: it counts as gone already, and a
        thousand nodes would otherwise all look again at its one moment."""
        return self._watch.next_stale_at(self.monotonic(), exclude={me, *self._released})

    def _judge_nodes(
        self, me: str, node_infos: dict[str, ObjectInfo]
    ) -> tuple[frozenset[str], frozenset[str], int]:
        """Observe one node listing: the live node ids (this one included),
        the ones the desired assignment is computed from, and the version
        it is computed with."""
        now = self.monotonic()
        bounds = self._written_by(me, node_infos)
        self._watch.observe({n: info.etag for n, info in node_infos.items()}, now, bounds)
        self._judged_listing_started = self._listing_started
        for gone in [n for n in self._node_bodies if n not in node_infos]:
            del self._node_bodies[gone]
        self._listed_sizes = {n: info.size for n, info in node_infos.items()}
        released = {
            n
            for n, (etag, _size, doc) in self._node_bodies.items()
            if doc.released and self._watch.etag(n) == etag
        }
        self._released = frozenset(released)
        live_ids = set(self._watch.live(now, released))
        live_ids.add(me)
        assigned = frozenset(live_ids - self._long_expired(me, node_infos))
        return frozenset(live_ids), assigned, self._assignment_version(assigned)

    def _written_by(self, me: str, node_infos: Mapping[str, ObjectInfo]) -> dict[str, float]:
        """For each other node whose lease changed since the last listing
        judged, the latest time its new version can have been written, from
        the store's stamps against this node's own lease (empty when this
        listing shows no write of ours whose answer we timed, when the
        stamps were found inconsistent, or when the previous listing judged
        is too old to check them against: ``timing.stamps_checkable``)."""
        mine = node_infos.get(me)
        seen_at = self._judged_listing_started
        if (
            self.answered_at is None
            or self._stamps_inconsistent
            or mine is None
            or seen_at is None
            or self._listing_started is None
            or not stamps_checkable(self._listing_started, seen_at, self.ttl_seconds)
        ):
            return {}
        answered = self.answered_at(mine.etag)
        if answered is None:
            return {}
        bounds: dict[str, float] = {}
        for node, info in node_infos.items():
            previous = self._watch.etag(node)
            if node == me or previous is None or previous == info.etag:
                continue
            bound = written_by(answered, mine.last_modified, info.last_modified)
            if stamps_contradict(bound, seen_at):
                self._stamps_inconsistent = True
                log.warning(
                    "the store's LastModified stamps put node %s's lease write %.1f s before a "
                    "listing that still showed its previous version: not using the store's "
                    "stamps for failover from now on (a store whose gateways' clocks disagree?)",
                    node,
                    seen_at - bound,
                )
                return {}
            bounds[node] = bound
        return bounds

    def _not_dead(self, named: Collection[str], node_infos: Mapping[str, ObjectInfo]) -> set[str]:
        """The ``named`` nodes not already dead at the version ``node_infos``
        lists: a lease watched unchanged for a TTL at that very ETag is
        judged stale whatever its body says (its holder is dead in every
        incarnation), so its body is not read. In a takeover that read
        would be one more request in sequence before the dead node's
        partitions are owned again."""
        now = self.monotonic()
        return {
            n
            for n in named
            if n not in node_infos
            or self._watch.etag(n) != node_infos[n].etag
            or not self._watch.is_stale(n, now)
        }

    def _read_node_bodies(
        self,
        me: str,
        node_infos: Mapping[str, ObjectInfo],
        named: Collection[str],
        counters: _Counters,
        *,
        first_sight: bool,
    ) -> None:
        """Read the node lease bodies this refresh needs (see the module
        docstring): those of ``named`` nodes whose ETag changed since their
        body was read (or never read), of nodes whose size changed since
        their body was read or their lease last listed, and with
        ``first_sight`` a bounded number of nodes never read."""
        needed: list[str] = []
        unseen: list[str] = []
        for node, info in node_infos.items():
            cached = self._node_bodies.get(node)
            listed_size = self._listed_sizes.get(node, info.size)
            if node == me:
                continue
            if cached is None:
                resized = listed_size != info.size
                (needed if node in named or resized else unseen).append(node)
            elif cached[0] != info.etag and (cached[1] != info.size or node in named):
                needed.append(node)
        if first_sight:
            needed += sorted(unseen)[: max(1, self.body_burst_limit // max(1, len(node_infos)))]
        keys = [node_lease_key(self.root, n) for n in needed]
        for node, key, stored in zip(needed, keys, self._get_all(keys, counters), strict=True):
            if stored is None:
                self._node_bodies.pop(node, None)
                continue
            try:
                doc = decode_node_lease(stored.body, key)
            except RecordError as err:
                self._warn_once(key, err)
                continue
            self._node_bodies[node] = (stored.etag, len(stored.body), doc)

    def _assignment_version(self, assigned: frozenset[str]) -> int:
        """The oldest assignment version a node of the assignment computes,
        so that every node computes the same one during a rolling upgrade.
        A node whose body is not read yet (or could not be) does not lower
        it: an older node's lease is always readable by a newer one, and
        is read at once up to 100 nodes (see ``BODY_BURST_LIMIT``); a node
        that names a record this node judges is read at once at any size."""
        versions = [ASSIGNMENT_VERSION]
        versions += [
            body[2].assignment for n in assigned if (body := self._node_bodies.get(n)) is not None
        ]
        return min(versions)

    def refresh(
        self,
        me: str,
        incarnation: str,
        partitions: frozenset[PartitionId],
        held: Mapping[PartitionId, OwnerRecord],
        unsettled: Collection[PartitionId] = (),
        nodes: dict[str, ObjectInfo] | None = None,
    ) -> ClusterState:
        """Read the nodes and the records this round's decision needs
        (everything this node must judge, or the changes only: see the
        module docstring).

        Args:
            held: the records this node holds, as it wrote them.
            unsettled: partitions whose last write lost its answer (read
                whatever the assignment says).
            nodes: a node listing just made (``QuietCheck.nodes``), whose
                bodies were read: the refresh starts from it.

        Raises:
            StorageError: a LIST or GET failed (the round should be skipped).
        """
        counters = _Counters()
        started = self.monotonic()
        full = self._full_read_due(me, partitions)
        if nodes is None:
            nodes = self._list_nodes(counters)
            self._read_node_bodies(me, nodes, (), counters, first_sight=True)
        live_ids, assigned, version = self._judge_nodes(me, nodes)
        desired = self.assignments.get(assigned, partitions, version)
        own_share = {p for p, n in desired.items() if n == me}
        wanted = own_share | set(held) if full else own_share - set(held)
        wanted |= set(unsettled)
        read = sorted(wanted, key=str)
        keys = [owner_key(self.root, pid) for pid in read]
        fetched = self._get_all(keys, counters)
        records: dict[PartitionId, OwnerRecord] = {}
        etags: dict[PartitionId, str] = {}
        unreadable: set[PartitionId] = set()
        for pid, key, stored in zip(read, keys, fetched, strict=True):
            record = self._decoded(key, stored)
            if record is _UNREADABLE:
                unreadable.add(pid)
            elif record is not None:
                records[pid] = record
                etags[pid] = record.etag
        for pid, record in held.items():
            if pid not in wanted:
                records[pid] = record  # as we wrote it
        named = {r.node for r in records.values() if r.node != me and not r.released}
        if named:
            # The nodes again, after the records: the owners they name are
            # judged by a listing that can only be newer than the records.
            nodes = self._list_nodes(counters)
            self._read_node_bodies(
                me, nodes, self._not_dead(named, nodes), counters, first_sight=False
            )
            live_ids, _assigned, _version = self._judge_nodes(me, nodes)
        if full:
            self._full_read_at = started
            self._full_read_partitions = partitions
        live = {n: self._incarnation(n) for n in live_ids}
        live[me] = incarnation
        self._listed_key = (live_ids, assigned, version, partitions)
        return ClusterState(
            live,
            desired,
            records,
            etags,
            frozenset(unreadable),
            counters.list_pages,
            counters.gets,
            self.next_stale_at(me),
            version,
            frozenset(wanted),
            "all" if full else "changes",
        )

    def _long_expired(self, me: str, node_infos: Mapping[str, ObjectInfo]) -> set[str]:
        """Nodes whose lease was last written two TTLs or more before this
        node's own last renewal, both as the store stamped them in one
        listing (no wall clock is read): left out of the desired
        assignment, so a node that just started does not wait a TTL of
        silence from every dead node's leftover lease before it agrees
        with the others on the assignment. Only balance rests on this;
        their records stay protected until the ETag watch calls them dead,
        as for any node. Stamps this node found inconsistent
        (``_written_by``) are not read here either: a gateway whose clock is
        far off would leave a live node out of this node's assignment only,
        and the nodes would hand partitions back and forth for ever."""
        mine = node_infos.get(me)
        if mine is None or self._stamps_inconsistent:
            return set()
        return {
            n
            for n, info in node_infos.items()
            if n != me
            and (mine.last_modified - info.last_modified).total_seconds() >= 2 * self.ttl_seconds
        }

    def _list_nodes(self, counters: _Counters) -> dict[str, ObjectInfo]:
        infos: dict[str, ObjectInfo] = {}
        pages = 0
        self._listing_started = self.monotonic()
        for page in self.store.list_pages(nodes_prefix(self.root)):
            pages += 1
            for info in page:
                node = parse_node_lease_key(info.key, self.root)
                if node is not None:
                    infos[node] = info
        counters.list_pages += max(pages, 1)
        return infos

    def _get_all(self, keys: list[str], counters: _Counters) -> list[StoredObject | None]:
        """GET ``keys`` (``None``: absent), side by side through
        ``requests`` when there is more than one.

        Raises:
            StorageError: a GET failed (the first failure, once all ended).
        """
        counters.gets += len(keys)
        return side_by_side(self.requests, lambda key: get_or_none(self.store, key), keys)

    def _incarnation(self, node: str) -> str:
        """The incarnation last read for ``node``; unknown (its body could
        not be read) protects all its records: never guess a node dead."""
        cached = self._node_bodies.get(node)
        return UNKNOWN_INCARNATION if cached is None else cached[2].incarnation

    def _decoded(self, key: str, stored: StoredObject | None) -> OwnerRecord | None:
        if stored is None:
            return None
        try:
            doc = decode_owner(stored.body, key)
        except RecordError as err:
            # Unreadable (e.g. a newer version's): never overwritten, since
            # we can know neither its owner nor its term.
            self._warn_once(key, err)
            return _UNREADABLE
        return OwnerRecord(doc.node, doc.incarnation, doc.term, doc.released, stored.etag)

    def _warn_once(self, key: str, err: Exception) -> None:
        if key not in self._unreadable:
            self._unreadable.add(key)
            log.warning("ignoring unreadable ownership object %s: %s", key, err)


def side_by_side(pool: RequestPool | None, fn: Callable[[A], T], items: Iterable[A]) -> list[T]:
    """``fn`` over ``items``, results in order: through ``pool`` when given
    and there is more than one, else in this thread (a round's GETs here,
    its conditional writes in ``NodeOwnership``)."""
    items = list(items)
    if pool is None or len(items) <= 1:
        return [fn(item) for item in items]
    return list(pool.map(fn, items))
