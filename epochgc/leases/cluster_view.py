"""The cluster as one node sees it: live nodes and the ownership records it
needs (docs/operating.md, "Nodes, ownership and balance").

Nodes are always read by LIST (one page per 1000 nodes): their ETags are
what liveness rests on. Ownership records are read one of three ways, so
that what every node reads after a change stays inside the store's
per-prefix request rates at a thousand nodes:

* **a full listing** (one LIST page per 1000 records, bodies fetched only
  when the decision needs them and their ETag changed since they were last
  read) when a full read is due and the whole cluster listing at once stays
  under ``LIST_BURST_LIMIT`` pages;
* **a full read by key** (one GET for each partition this node owns or
  should own) when a full read is due and a listing by every node at once
  would not (100,000 records over 1,000 nodes: 100 pages each, 100,000 LIST
  requests on one prefix within a round);
* **the changes only** otherwise: one GET for each partition that has become
  this node's own but is not held by it yet (and each whose last write
  lost its answer); the records it holds are the ones it wrote. After a
  node joins or leaves that is a handful of GETs per node, not a listing.

A full read is due at the first refresh of an incarnation, when the
partitions change (a topic created or deleted), and every
``relist_seconds`` (plus a per-node offset of up to half of that, so nodes
that started together do not relist together): it is what notices a
record changed by someone else, which only a lapsed lease or an operator
can cause (partition terms keep that safe meanwhile).

Liveness never trusts a body's times (the one use of them is for balance
only, see ``_long_expired``): a node is live until its lease's ETag was
seen unchanged for a TTL on this process's monotonic clock
(``lease_timing.VersionWatch``), or its body says released. A node lease's
body is read on first sight, when its size changed since it was read (a
release adds the ``released`` field), and when a record this node must
judge names that node and its ETag changed since the body was read (the
node may have restarted with another incarnation). Missing a body can only
delay a takeover, never cause one.

Records are always read before the node listing that judges their owners,
so a record written by a node that started after that listing cannot
appear; a record whose node is absent from the (later) node listing names
a node whose lease is gone.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from epochgc.errors import RecordError
from epochgc.leases.assignment import (
    ASSIGNMENT_VERSION,
    UNKNOWN_INCARNATION,
    AssignmentCache,
    OwnerRecord,
)
from epochgc.leases.holder_codec import NodeLeaseDocument, decode_node_lease, decode_owner
from epochgc.leases.timing import VersionWatch
from epochgc.storage.keys import (
    PartitionId,
    node_lease_key,
    nodes_prefix,
    owner_key,
    owners_prefix,
    parse_node_lease_key,
    parse_owner_key,
)
from epochgc.storage.object_store import ObjectInfo, ObjectStore, get_or_none

log = logging.getLogger("epochgc.watermarks.cluster_view")


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
    listed: dict[PartitionId, str]
    """Every ownership record listed: partition -> ETag."""
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
    observed: frozenset[PartitionId] | None = None
    """The partitions whose record this refresh read (``listed`` is exact
    for them); ``None``: every record was listed."""
    read: str = "list"
    """How the records were read: ``list``, ``by key`` or ``changes``."""


LIST_BURST_LIMIT = 10_000
"""Most LIST pages of ownership records the whole cluster may send at once
(every node's full read, e.g. at a cluster's start, falls within one round):
about 2,000 a second over a 5 s round, well inside S3's 5,500 reads a
second per prefix. Above it a full read is one GET per record this node
needs instead."""


_UNPARSED = PartitionId("", 0, -1)
"""Sentinel: an owner key not parsed yet."""

_UNREADABLE = OwnerRecord("", "", 1)
"""Sentinel: a record listed whose body does not parse."""


@dataclass(frozen=True)
class QuietCheck:
    """What ``unchanged_since_listing`` found, and what it cost."""

    unchanged: bool
    list_pages: int
    gets: int
    next_stale_at: float | None = None


@dataclass
class _Counters:
    list_pages: int = 0
    gets: int = 0


@dataclass
class _Read:
    """What one refresh read, before it becomes a ``ClusterState``."""

    live_ids: frozenset[str]
    assigned: frozenset[str]
    version: int
    desired: Mapping[PartitionId, str]
    node_infos: dict[str, ObjectInfo]
    listed: dict[PartitionId, str]
    observed: frozenset[PartitionId] | set[PartitionId] | None
    read: str
    records: dict[PartitionId, OwnerRecord] = field(default_factory=dict)
    unreadable: set[PartitionId] = field(default_factory=set)

    def add(self, pid: PartitionId, record: OwnerRecord | None) -> None:
        if record is _UNREADABLE:
            self.unreadable.add(pid)
        elif record is not None:
            self.records[pid] = record


def _digest_fraction(node: str) -> float:
    """A stable number in [0, 1) for ``node``: its offset in the relisting."""
    digest = hashlib.blake2b(b"relist\0" + node.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass
class ClusterView:
    """Reads cluster state: nodes by LIST, records by LIST or by key, with
    ETag-keyed body caches.

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
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    """Wall clock: only to leave long-dead nodes out of the assignment."""
    assignments: AssignmentCache = field(default_factory=AssignmentCache)
    relist_seconds: float = 60.0
    """How often (plus a per-node offset) a full read of the records is due."""
    list_burst_limit: int = LIST_BURST_LIMIT
    """See ``LIST_BURST_LIMIT``."""
    _watch: VersionWatch = field(init=False)
    _node_bodies: dict[str, tuple[str, int, NodeLeaseDocument]] = field(default_factory=dict)
    """Node id -> (ETag, size, body) of the last body read."""
    _records: dict[PartitionId, OwnerRecord] = field(default_factory=dict)
    """Partition -> last record read (its ``etag`` is the version read)."""
    _unreadable: set[str] = field(default_factory=set)
    _owner_keys: dict[str, PartitionId | None] = field(default_factory=dict)
    """Parsed owner keys: a round lists every record, a parse each would
    cost more than the listing."""
    _listed_key: tuple[frozenset[str], frozenset[str], int, frozenset[PartitionId]] | None = None
    """Live nodes, assigned nodes, assignment version and partitions at the
    last refresh."""
    _full_read_at: float | None = None
    """Monotonic time the last full read of the records began."""
    _full_read_partitions: frozenset[PartitionId] = frozenset()
    _cluster_size: int = 0
    """Nodes of the assignment at the last node listing."""

    def __post_init__(self) -> None:
        self._watch = VersionWatch(self.ttl_seconds)

    def remember(self, pid: PartitionId, record: OwnerRecord) -> None:
        """Cache a record we wrote ourselves (no GET needed to know it)."""
        self._records[pid] = record

    def unchanged_since_listing(self, me: str, partitions: frozenset[PartitionId]) -> QuietCheck:
        """LIST the nodes only: whether the nodes the assignment is computed
        from and the partitions are what they were at the last ``refresh``,
        and no full read is due. The caller skips the refresh only when its
        own share was settled then (see ``NodeOwnership``).

        Raises:
            StorageError: the LIST or a GET failed.
        """
        counters = _Counters()
        if self._listed_key is None or self._full_read_due(me, partitions):
            return QuietCheck(False, 0, 0)
        key = (*self._judge_nodes(me, self._list_nodes(counters), counters), partitions)
        return QuietCheck(
            key == self._listed_key, counters.list_pages, counters.gets, self.next_stale_at(me)
        )

    def _full_read_due(self, me: str, partitions: frozenset[PartitionId]) -> bool:
        if self._full_read_at is None or partitions != self._full_read_partitions:
            return True
        offset = _digest_fraction(me) * self.relist_seconds / 2
        return self.monotonic() - self._full_read_at >= self.relist_seconds + offset

    def next_stale_at(self, me: str) -> float | None:
        """When the first other node still live would be judged dead if its
        lease stays unchanged (monotonic; ``None``: no other node)."""
        return self._watch.next_stale_at(self.monotonic(), exclude=(me,))

    def _judge_nodes(
        self, me: str, node_infos: dict[str, ObjectInfo], counters: _Counters
    ) -> tuple[frozenset[str], frozenset[str], int]:
        """Observe one node listing: the live node ids (this one included),
        the ones the desired assignment is computed from, and the version
        it is computed with."""
        now = self.monotonic()
        self._watch.observe({n: info.etag for n, info in node_infos.items()}, now)
        for gone in [n for n in self._node_bodies if n not in node_infos]:
            del self._node_bodies[gone]
        for node, info in node_infos.items():
            cached = self._node_bodies.get(node)
            if node != me and (
                cached is None or (cached[0] != info.etag and cached[1] != info.size)
            ):
                self._read_node(node, info, counters)
        released = {
            n
            for n, (etag, _size, doc) in self._node_bodies.items()
            if doc.released and self._watch.etag(n) == etag
        }
        live_ids = set(self._watch.live(now, released))
        live_ids.add(me)
        assigned = frozenset(live_ids - self._long_expired(me))
        self._cluster_size = len(assigned)
        return frozenset(live_ids), assigned, self._assignment_version(assigned)

    def _assignment_version(self, assigned: frozenset[str]) -> int:
        """The oldest assignment version a node of the assignment computes,
        so that every node computes the same one during a rolling upgrade.
        A node whose body could not be read does not lower it: an older
        node's lease is always readable by a newer one."""
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
    ) -> ClusterState:
        """Read the nodes and the records this round's decision needs (a
        full listing, a full read by key, or the changes only: see the
        module docstring).

        Args:
            held: the records this node holds, as it wrote them.
            unsettled: partitions whose last write lost its answer (read
                whatever the assignment says).

        Raises:
            StorageError: a LIST or GET failed (the round should be skipped).
        """
        counters = _Counters()
        started = self.monotonic()
        full = self._full_read_due(me, partitions)
        if full and not self._cluster_size:  # how many would list at once: look first
            self._judge_nodes(me, self._list_nodes(counters), counters)
        if full and self._listing_is_cheap(len(partitions)):
            state = self._refresh_by_listing(me, partitions, held, unsettled, counters)
        else:
            state = self._refresh_by_key(me, partitions, held, unsettled, full, counters)
        if full:
            self._full_read_at = started
            self._full_read_partitions = partitions
        live = {n: self._incarnation(n) for n in state.live_ids}
        live[me] = incarnation
        stale_nodes = {
            r.node
            for r in state.records.values()
            if r.node != me and r.node in state.live_ids and not r.released
        }
        for node in stale_nodes:
            cached = self._node_bodies.get(node)
            seen = state.node_infos.get(node)
            if seen is not None and (cached is None or cached[0] != seen.etag):
                self._read_node(node, seen, counters)
                live[node] = self._incarnation(node)
        self._listed_key = (state.live_ids, state.assigned, state.version, partitions)
        return ClusterState(
            live,
            state.desired,
            state.records,
            state.listed,
            frozenset(state.unreadable),
            counters.list_pages,
            counters.gets,
            self.next_stale_at(me),
            state.version,
            None if state.observed is None else frozenset(state.observed),
            state.read,
        )

    def _listing_is_cheap(self, partitions: int) -> bool:
        """Every node listing every record at once stays under the burst limit."""
        pages = max(1, math.ceil(partitions / 1000))
        return self._cluster_size * pages <= self.list_burst_limit

    def _refresh_by_listing(
        self,
        me: str,
        partitions: frozenset[PartitionId],
        held: Mapping[PartitionId, OwnerRecord],
        unsettled: Collection[PartitionId],
        counters: _Counters,
    ) -> _Read:
        listed = self._list_owners(counters)  # before the nodes: see the module docstring
        node_infos = self._list_nodes(counters)
        live_ids, assigned, version = self._judge_nodes(me, node_infos, counters)
        desired = self.assignments.get(assigned, partitions, version)
        wanted = {p for p, n in desired.items() if n == me} | set(held) | set(unsettled)
        read = _Read(live_ids, assigned, version, desired, node_infos, listed, None, "list")
        for pid in wanted:
            read.add(pid, self._record(pid, listed.get(pid), counters))
        return read

    def _refresh_by_key(
        self,
        me: str,
        partitions: frozenset[PartitionId],
        held: Mapping[PartitionId, OwnerRecord],
        unsettled: Collection[PartitionId],
        full: bool,
        counters: _Counters,
    ) -> _Read:
        _live, assigned, version = self._judge_nodes(me, self._list_nodes(counters), counters)
        desired = self.assignments.get(assigned, partitions, version)
        own_share = {p for p, n in desired.items() if n == me}
        wanted = own_share | set(held) if full else own_share - set(held)
        wanted |= set(unsettled)
        listed: dict[PartitionId, str] = {}
        records = [(pid, self._get_record(pid, counters)) for pid in sorted(wanted, key=str)]
        # The nodes again, after the records: their owners are judged by a
        # listing that can only be newer than the records.
        node_infos = self._list_nodes(counters)
        live_ids, _assigned, _version = self._judge_nodes(me, node_infos, counters)
        how = "by key" if full else "changes"
        read = _Read(live_ids, assigned, version, desired, node_infos, listed, wanted, how)
        for pid, record in records:
            if record is not None and record is not _UNREADABLE:
                listed[pid] = record.etag
            read.add(pid, record)
        for pid, record in held.items():
            if pid not in wanted:
                read.records[pid] = record  # as we wrote it
        return read

    def _long_expired(self, me: str) -> set[str]:
        """Nodes whose lease, as first seen, expired a TTL or more before
        our wall clock and has not changed since: left out of the desired
        assignment, so a node that just started does not wait a TTL of
        silence from every dead node's leftover lease before it agrees
        with the others on the assignment. Only balance rests on this wall
        clock reading; their records stay protected until the ETag watch
        calls them dead, as for any node."""
        wall = self.now()
        return {
            n
            for n, (etag, _size, doc) in self._node_bodies.items()
            if n != me
            and self._watch.etag(n) == etag
            and (wall - doc.expires_at).total_seconds() >= self.ttl_seconds
        }

    def _list_owners(self, counters: _Counters) -> dict[PartitionId, str]:
        listed: dict[PartitionId, str] = {}
        parsed: dict[str, PartitionId | None] = {}
        for page in self.store.list_pages(owners_prefix(self.root)):
            counters.list_pages += 1
            for info in page:
                pid = self._owner_keys.get(info.key, _UNPARSED)
                if pid is _UNPARSED:
                    pid = parse_owner_key(info.key, self.root)
                parsed[info.key] = pid
                if pid is not None:
                    listed[pid] = info.etag
        self._owner_keys = parsed
        if not listed:
            counters.list_pages = max(counters.list_pages, 1)
        return listed

    def _list_nodes(self, counters: _Counters) -> dict[str, ObjectInfo]:
        infos: dict[str, ObjectInfo] = {}
        pages = 0
        for page in self.store.list_pages(nodes_prefix(self.root)):
            pages += 1
            for info in page:
                node = parse_node_lease_key(info.key, self.root)
                if node is not None:
                    infos[node] = info
        counters.list_pages += max(pages, 1)
        return infos

    def _read_node(self, node: str, info: ObjectInfo, counters: _Counters) -> None:
        key = node_lease_key(self.root, node)
        counters.gets += 1
        stored = get_or_none(self.store, key)
        if stored is None:
            self._node_bodies.pop(node, None)
            return
        try:
            doc = decode_node_lease(stored.body, key)
        except RecordError as err:
            self._warn_once(key, err)
            return
        self._node_bodies[node] = (stored.etag, len(stored.body), doc)

    def _incarnation(self, node: str) -> str:
        """The incarnation last read for ``node``; unknown (its body could
        not be read) protects all its records: never guess a node dead."""
        cached = self._node_bodies.get(node)
        return UNKNOWN_INCARNATION if cached is None else cached[2].incarnation

    def _record(
        self, pid: PartitionId, etag: str | None, counters: _Counters
    ) -> OwnerRecord | None:
        if etag is None:
            self._records.pop(pid, None)
            return None
        cached = self._records.get(pid)
        if cached is not None and cached.etag == etag:
            return cached
        return self._get_record(pid, counters)

    def _get_record(self, pid: PartitionId, counters: _Counters) -> OwnerRecord | None:
        """The record of ``pid`` read by key (no listing to compare ETags
        with): ``None`` when there is none."""
        key = owner_key(self.root, pid)
        counters.gets += 1
        stored = get_or_none(self.store, key)
        if stored is None:
            self._records.pop(pid, None)
            return None
        return self._decoded(pid, key, stored.body, stored.etag)

    def _decoded(self, pid: PartitionId, key: str, body: bytes, etag: str) -> OwnerRecord:
        try:
            doc = decode_owner(body, key)
        except RecordError as err:
            # Unreadable (e.g. a newer version's): never overwritten, since
            # we can know neither its owner nor its term.
            self._warn_once(key, err)
            return _UNREADABLE
        record = OwnerRecord(doc.node, doc.incarnation, doc.term, doc.released, etag)
        self._records[pid] = record
        return record

    def _warn_once(self, key: str, err: Exception) -> None:
        if key not in self._unreadable:
            self._unreadable.add(key)
            log.warning("ignoring unreadable ownership object %s: %s", key, err)
