"""Which node should own which partition, and what this node does about it
this round (docs/operating.md, "Nodes, ownership and balance"). Pure: no I/O, no
clock reads (monotonic times come in as arguments).

Every node computes the same *desired assignment* from the same live node
list, with stable hashes (blake2b of node and partition ids; never Python's
salted ``hash``) and exact quotas: each node gets ``floor`` or ``ceil`` of the
fair share (which nodes get the ``ceil`` is itself decided by a stable hash).

Version 2 (``ASSIGNMENT_VERSION``) is consistent hashing with bounded loads:
every node has ``RING_POINTS_PER_NODE`` points on a hash ring; partitions, in
a stable hashed order, go to the first node clockwise from their own ring
position that still has room. Skipping full nodes is a union-find over ring
points, so one assignment costs ``O(P log(N * points))`` for ``P``
partitions and ``N`` nodes: about 0.6 s of CPU at 100,000 x 1,000 where
version 1 took about 110 s.

Version 1 is rendezvous (highest-random-weight) hashing with the same
quotas: it weighs every partition against every node, ``O(P * N)``. It is
kept only for clusters in the middle of an upgrade: every node advertises
the newest version it computes in its node lease, and all compute with the
oldest one advertised by a live node, so two versions never disagree about
who should own a partition (docs/contract.md, "Node leases and ownership
records").

Exact quotas cost moves: a join or a leave also moves partitions whose
first choice filled up differently (a cascade). Measured with version 2
(``bench_ownership`` prints it for its runs): a leave of one node moves
about 2.2 times its share at 10,000 x 100 and 5 times at 100,000 x 1,000
(0.5% of all partitions); ten nodes leaving or joining at once move 1.3
and 2.3 times their share. Version 1 measured the same way moved 1.95
times at 10,000 x 100 and 2.5 times at 20,000 x 200, growing with the node
count as well. Moves per round are bounded anyway (``max_moves``).

``plan_round`` turns the desired assignment and the ownership records into
this node's moves:

* take a partition that is its own and free: no record, a released one, or
  one whose owner (node and incarnation) is not live;
* hand back (release) a partition it owns that is another live node's own,
  so that node takes it (graceful: never two owners);
* nothing else. It never takes a partition whose record names a live owner,
  and never one that is another node's own.

Moves per round are bounded (takes first: they restore availability; then
hand-backs), so a node that finds itself alone at start does not take
everything, and a restart does not reshuffle the cluster at once.

Other nodes' liveness comes in as ``live``: ``cluster_view`` judges their
leases with ``lease_timing.VersionWatch``, the rule every lease follows (a
node is live until its lease object was seen with the same ETag for a whole
TTL on the observer's monotonic clock, or was released).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from epochgc.leases.holder_codec import ASSIGNMENT_VERSION
from epochgc.storage.keys import PartitionId

RING_POINTS_PER_NODE = 100
"""Ring points per node in version 2: more points spread each node's arc
more evenly (fewer partitions overflow their first choice) at
``N * points`` hashes per assignment."""


def _digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def _sort_key(pid: PartitionId) -> tuple[str, int, int]:
    """Partition order without the dataclass's slow generated ``__lt__``."""
    return (pid.topic, pid.revision, pid.partition)


def _partition_bytes(pid: PartitionId) -> bytes:
    return f"{pid.topic}/{pid.revision}/{pid.partition}".encode()


def desired_assignment(
    nodes: Iterable[str],
    partitions: Iterable[PartitionId],
    version: int = ASSIGNMENT_VERSION,
) -> dict[PartitionId, str]:
    """The owner every node agrees ``pid`` should have, given the live nodes
    and the assignment version they all compute.

    Balanced: every node gets ``floor`` or ``ceil`` of the fair share. Empty
    when there are no nodes.

    Raises:
        ValueError: a version this code does not compute.
    """
    node_list = sorted(set(nodes))
    unique = set(partitions)
    if version not in (1, 2):
        raise ValueError(f"unknown assignment version {version}")
    if not node_list:
        return {}
    quotas = _quotas(node_list, len(unique))
    if version == 1:
        return _rendezvous_assignment(node_list, sorted(unique, key=_sort_key), quotas)
    return _ring_assignment(node_list, unique, quotas)


def _quotas(node_list: list[str], count: int) -> dict[str, int]:
    """``floor`` or ``ceil`` of the fair share each; the ``ceil`` goes to
    the nodes first in a stable hashed order."""
    quota_base, extra = divmod(count, len(node_list))
    by_quota_rank = sorted(node_list, key=lambda n: (_digest(b"quota\0" + n.encode()), n))
    return {n: quota_base + (1 if i < extra else 0) for i, n in enumerate(by_quota_rank)}


class _Ring:
    """Ring points of every node, and a union-find that skips the points of
    full nodes: ``first_open(i)`` is the first point at or after ``i``
    (clockwise) whose node still has room."""

    def __init__(self, node_list: list[str], points_per_node: int) -> None:
        ring = sorted(
            (_digest(b"%s\0%d" % (node.encode(), k)), index)
            for index, node in enumerate(node_list)
            for k in range(points_per_node)
        )
        self.positions = [position for position, _node in ring]
        self.owner = [index for _position, index in ring]
        self._points_of: list[list[int]] = [[] for _ in node_list]
        for point, index in enumerate(self.owner):
            self._points_of[index].append(point)
        self._next = list(range(len(ring) + 1))
        """Point -> a later point to look at (itself: open); the last entry
        is the end of the ring."""

    def close(self, index: int) -> None:
        """Node ``index`` is full: skip its points from now on."""
        for point in self._points_of[index]:
            self._next[point] = point + 1

    def first_open(self, position: int) -> int:
        """The first open point clockwise from ``position`` (wrapping once).
        There is always one while a partition is left to place."""
        end = len(self.positions)
        point = self._find(bisect.bisect_left(self.positions, position))
        return self._find(0) if point == end else point

    def _find(self, point: int) -> int:
        root = point
        while self._next[root] != root:
            root = self._next[root]
        while self._next[point] != root:  # path compression
            self._next[point], point = root, self._next[point]
        return root


def _ring_assignment(
    node_list: list[str], pids: Iterable[PartitionId], quotas: Mapping[str, int]
) -> dict[PartitionId, str]:
    """Version 2: consistent hashing with bounded (exact) loads.

    Partitions are placed in the order of their 128-bit digest (on a
    BLAKE2 collision, partition order), each at the ring position its last
    8 bytes name. One integer carries both, so the sort compares
    integers."""
    room = [quotas[node] for node in node_list]
    ring = _Ring(node_list, RING_POINTS_PER_NODE)
    for index, left in enumerate(room):
        if left <= 0:
            ring.close(index)
    blake2b, from_bytes = hashlib.blake2b, int.from_bytes
    work = [
        (from_bytes(blake2b(_partition_bytes(pid), digest_size=16).digest(), "big"), pid)
        for pid in pids
    ]
    work.sort()
    low = (1 << 64) - 1
    out: dict[PartitionId, str] = {}
    for digest, pid in work:
        index = ring.owner[ring.first_open(digest & low)]
        room[index] -= 1
        if room[index] == 0:
            ring.close(index)
        out[pid] = node_list[index]
    return out


def _rendezvous_assignment(
    node_list: list[str], pids: list[PartitionId], quotas: Mapping[str, int]
) -> dict[PartitionId, str]:
    """Version 1: partitions, in a stable hashed order, go to their
    highest-weight node that still has room. ``O(P * N)``."""
    room = dict(quotas)
    prefixes = [(n, n.encode() + b"\0") for n in node_list]
    order = sorted((_digest(_partition_bytes(p)), _sort_key(p), p) for p in pids)
    out: dict[PartitionId, str] = {}
    for _rank, _key, pid in order:
        suffix = _partition_bytes(pid)
        weights = [(_digest(prefix + suffix), n) for n, prefix in prefixes]
        best = max(weights)[1]
        if room[best] <= 0:
            best = next(n for _w, n in sorted(weights, reverse=True) if room[n] > 0)
        room[best] -= 1
        out[pid] = best
    return out


@dataclass
class AssignmentCache:
    """Remembers the last desired assignment: it changes only when the live
    node list, the partition set or the version does. Not thread-safe; one
    per caller (the simulation shares one among its nodes: the inputs are
    the same)."""

    compute: Callable[[frozenset[str], frozenset[PartitionId], int], dict[PartitionId, str]] = (
        desired_assignment
    )
    """What computes an assignment (the simulation shares one computation
    among its thousand nodes)."""
    _key: tuple[frozenset[str], frozenset[PartitionId], int] | None = None
    _value: dict[PartitionId, str] = field(default_factory=dict)
    computed: int = 0

    def get(
        self,
        nodes: Iterable[str],
        partitions: Iterable[PartitionId],
        version: int = ASSIGNMENT_VERSION,
    ) -> dict[PartitionId, str]:
        """The desired assignment (computed again only when an input changed).
        Passing a ``frozenset`` of partitions saves copying it every call."""
        key = (frozenset(nodes), frozenset(partitions), version)
        if key != self._key:
            self._value = self.compute(*key)
            self._key = key
            self.computed += 1
        return self._value


@dataclass(frozen=True)
class OwnerRecord:
    """An ownership record as this round saw it."""

    node: str
    incarnation: str
    term: int
    released: bool = False
    etag: str = ""


class MoveKind(Enum):
    """What one move does to an ownership record."""

    TAKE = "take"
    """Free (no record, or released): create it, or CAS it with term + 1."""
    TAKE_OVER = "take_over"
    """Its owner is not live: CAS it to us with term + 1."""
    HAND_BACK = "hand_back"
    """Ours, but another live node's own: CAS it to released."""


@dataclass(frozen=True)
class Move:
    """One conditional write to do this round."""

    kind: MoveKind
    pid: PartitionId
    record: OwnerRecord | None
    """The record seen (its ETag is the CAS condition); ``None``: none."""
    to: str
    """The partition's desired owner."""


@dataclass(frozen=True)
class RoundPlan:
    """This node's decisions for one round."""

    moves: tuple[Move, ...]
    deferred: int
    """Moves wanted but left for later rounds by ``max_moves``."""


def is_owned_by(record: OwnerRecord | None, node: str, incarnation: str) -> bool:
    """The record names ``node``'s incarnation ``incarnation`` and is held."""
    return (
        record is not None
        and not record.released
        and record.node == node
        and record.incarnation == incarnation
    )


UNKNOWN_INCARNATION = "*"
"""In ``live``: the node is live but its incarnation could not be read;
every record naming it is protected, whatever incarnation it names."""


def is_free(record: OwnerRecord | None, live: Mapping[str, str]) -> bool:
    """Nobody live owns the partition: no record, released, or its owner's
    node is not live or is live with another incarnation (a restarted
    process is a new owner; the old one stopped before the new one got the
    node lease)."""
    if record is None or record.released:
        return True
    current = live.get(record.node)
    if current == UNKNOWN_INCARNATION:
        return False
    return current != record.incarnation


def plan_round(
    me: str,
    incarnation: str,
    live: Mapping[str, str],
    records: Mapping[PartitionId, OwnerRecord],
    desired: Mapping[PartitionId, str],
    *,
    max_moves: int,
) -> RoundPlan:
    """This node's moves for one round.

    Args:
        me: this node's id; ``incarnation`` its current incarnation. The
            caller plans only while its own node lease is valid.
        live: node id -> incarnation of every node whose lease is live
            (this node included).
        records: the ownership records seen, by partition (missing: none).
        desired: the desired assignment over ``live`` (``desired_assignment``).
        max_moves: bound on the moves of this round (>= 1).

    Returns:
        The moves, takes first, each group in partition order.
    """
    if max_moves < 1:
        raise ValueError(f"max_moves must be >= 1, got {max_moves}")
    takes: list[Move] = []
    hand_backs: list[Move] = []
    candidates = {pid for pid, want in desired.items() if want == me}
    candidates.update(
        pid for pid, r in records.items() if pid in desired and is_owned_by(r, me, incarnation)
    )
    for pid in sorted(candidates, key=_sort_key):
        want = desired[pid]
        record = records.get(pid)
        if is_owned_by(record, me, incarnation):
            if want != me and want in live:
                hand_backs.append(Move(MoveKind.HAND_BACK, pid, record, want))
            continue
        if want != me or not is_free(record, live):
            continue
        kind = MoveKind.TAKE if record is None or record.released else MoveKind.TAKE_OVER
        takes.append(Move(kind, pid, record, want))
    wanted = takes + hand_backs
    return RoundPlan(tuple(wanted[:max_moves]), max(0, len(wanted) - max_moves))
