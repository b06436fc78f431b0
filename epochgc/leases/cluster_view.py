"""The cluster as one node sees it: live nodes and ownership records, read
by LIST (docs/operating.md, "Nodes, ownership and balance").

One refresh costs one LIST page per 1000 ownership records plus one per
1000 nodes, whatever the partitions: the listings carry ETags, and a body
is fetched only when the decision needs it and its ETag changed since it
was last read (bodies are cached by ETag):

* an ownership record's body, for the partitions whose desired owner is
  this node (the only ones it may take; the ones it owns it wrote itself);
* a node lease's body on first sight, when its size changed since the body
  was read (a release adds the ``released`` field: a stopped node leaves
  the live list at once, without waiting a TTL), and when a record this
  node must judge names that node and its ETag changed since the body was
  read (the node may have restarted with another incarnation).

Liveness never trusts a body's times (the one use of them is for balance
only, see ``_long_expired``): a node is live until its lease's
ETag was seen unchanged for a TTL on this process's monotonic clock
(``lease_timing.VersionWatch``), or its body says released. Missing a body
can only delay a takeover, never cause one: a node is judged dead only by
its own release or by a TTL of silence.

The listing of owners comes before the listing of nodes, so a record
written by a node that started after our node listing cannot appear; a
record whose node is absent from the (later) node listing names a node
whose lease is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Executor
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
    records_listed: bool = True
    """False: ``listed`` is the last listing (``refresh(after=...)``)."""


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
    nodes_left: bool = False
    """What changed is only that nodes left (judged dead or released):
    ``refresh(after=...)`` may act on the last records listing."""
    node_infos: Mapping[str, ObjectInfo] = field(default_factory=dict)
    """The node listing it made (``refresh(after=...)`` uses it)."""


@dataclass
class _Counters:
    list_pages: int = 0
    gets: int = 0


@dataclass
class ClusterView:
    """Reads cluster state by LIST, with ETag-keyed body caches.

    Example::

        view = ClusterView(store, "epochgc", ttl_seconds=15.0, monotonic=time.monotonic)
        state = view.refresh("node-1", lease.incarnation, partitions, mine={})
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
    readers: Executor | None = None
    """Where the record bodies a refresh needs are read, several at once
    (``None``: one after another). A round that takes over a dead node's
    partitions reads each of them first."""
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
    last records listing."""
    _listed_at: float = 0.0
    """Monotonic time the last records listing began."""
    _listing: dict[PartitionId, str] | None = None
    """The last records listing (partition -> ETag), kept current with this
    node's own writes (``remember``): what a round after a death acts on."""

    def __post_init__(self) -> None:
        self._watch = VersionWatch(self.ttl_seconds)

    def remember(self, pid: PartitionId, record: OwnerRecord) -> None:
        """Cache a record we wrote ourselves (no GET needed to know it)."""
        self._records[pid] = record
        if self._listing is not None:
            self._listing[pid] = record.etag

    def unchanged_since_listing(
        self, me: str, partitions: frozenset[PartitionId], max_age_seconds: float
    ) -> QuietCheck:
        """LIST the nodes only: whether the nodes the assignment is computed
        from and the partitions are what they were at the last ``refresh``,
        which listed the records less than ``max_age_seconds`` ago. The
        caller skips the records' listing only when its own share was
        settled then (see ``NodeOwnership``).

        Raises:
            StorageError: the LIST or a GET failed.
        """
        counters = _Counters()
        before = self._listed_key
        if before is None or self.monotonic() - self._listed_at >= max_age_seconds:
            return QuietCheck(False, 0, 0)
        node_infos = self._list_nodes(counters)
        live, assigned, version = self._judge_nodes(me, node_infos, counters)
        key = (live, assigned, version, partitions)
        return QuietCheck(
            key == before,
            counters.list_pages,
            counters.gets,
            self.next_stale_at(me),
            nodes_left=live < before[0]
            and assigned <= before[1]
            and (version, partitions) == before[2:],
            node_infos=node_infos,
        )

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
        mine: Collection[PartitionId],
        *,
        after: QuietCheck | None = None,
    ) -> ClusterState:
        """LIST owners, LIST nodes, fetch the bodies the decision needs.

        ``after``: this round's quiet check, when it found only that nodes
        left. Then nothing is listed: the decision rests on that check's node
        listing and on the last records listing, so the partitions of a node
        just found dead are taken over without waiting for a listing of every
        record, which a store loaded by every survivor asking at once serves
        last. Every record the decision needs that is not this node's own is
        read (the listing may predate it); a record someone changes after
        that read fails its conditional write. The caller lists the records
        at its next round.

        Raises:
            StorageError: a LIST or GET failed (the round should be skipped).
        """
        counters = _Counters()
        started = self.monotonic()
        if after is not None and after.nodes_left and self._listing is not None:
            listed, node_infos, relisted = dict(self._listing), dict(after.node_infos), False
        else:
            listed = self._list_owners(counters)
            node_infos = self._list_nodes(counters)
            relisted = True
        live_ids, assigned, version = self._judge_nodes(me, node_infos, counters)
        desired = self.assignments.get(assigned, partitions, version)
        wanted = {p for p, n in desired.items() if n == me} | set(mine)
        records: dict[PartitionId, OwnerRecord] = {}
        unreadable: set[PartitionId] = set()
        fetch: list[PartitionId] = []
        for pid in wanted:
            etag = listed.get(pid)
            known = self._records.get(pid)
            if not relisted and pid not in mine:
                # The last listing may predate its record (a peer that took
                # its share after it) or its latest version: read it.
                fetch.append(pid)
            elif etag is None:
                self._records.pop(pid, None)
            elif known is not None and known.etag == etag:
                records[pid] = known
            else:
                fetch.append(pid)
        counters.gets += len(fetch)
        reads = (
            map(self._fetch_record, fetch)
            if self.readers is None or len(fetch) <= 1
            else self.readers.map(self._fetch_record, fetch)
        )
        for pid, record in zip(fetch, reads, strict=True):
            if record is _UNREADABLE:
                unreadable.add(pid)
            elif record is not None:
                records[pid] = record
        live = {n: self._incarnation(n) for n in live_ids}
        live[me] = incarnation
        stale_nodes = {
            r.node
            for r in records.values()
            if r.node != me and r.node in live_ids and not r.released
        }
        for node in stale_nodes:
            cached = self._node_bodies.get(node)
            seen = node_infos.get(node)
            if seen is not None and (cached is None or cached[0] != seen.etag):
                self._read_node(node, seen, counters)
                live[node] = self._incarnation(node)
        if relisted:
            self._listed_key = (live_ids, assigned, version, partitions)
            self._listed_at = started
        return ClusterState(
            live,
            desired,
            records,
            listed,
            frozenset(unreadable),
            counters.list_pages,
            counters.gets,
            self.next_stale_at(me),
            version,
            records_listed=relisted,
        )

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
        self._listing = dict(listed)
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

    def _fetch_record(self, pid: PartitionId) -> OwnerRecord | None:
        """GET and cache ``pid``'s record (any thread; ``None``: gone)."""
        key = owner_key(self.root, pid)
        stored = get_or_none(self.store, key)
        if stored is None:
            self._records.pop(pid, None)
            return None
        try:
            doc = decode_owner(stored.body, key)
        except RecordError as err:
            # Unreadable (e.g. a newer version's): never overwritten, since
            # we can know neither its owner nor its term.
            self._warn_once(key, err)
            return _UNREADABLE
        record = OwnerRecord(doc.node, doc.incarnation, doc.term, doc.released, stored.etag)
        self._records[pid] = record
        return record

    def _warn_once(self, key: str, err: Exception) -> None:
        if key not in self._unreadable:
            self._unreadable.add(key)
            log.warning("ignoring unreadable ownership object %s: %s", key, err)
