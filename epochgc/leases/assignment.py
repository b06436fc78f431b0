"""Which node should own which partition, and what this node does about it
this round (docs/operating.md, "Nodes, ownership and balance"). Pure: no I/O, no
clock reads (monotonic times come in as arguments).

Every node computes the same *desired assignment* from the same live node
list: rendezvous (highest-random-weight) hashing with a stable hash
(blake2b of node id and partition id; never Python's salted ``hash``), with
bounded loads. Plain rendezvous hashing moves the fewest partitions when a
node joins or leaves, but its loads spread binomially: with 100 partitions
per node the busiest node gets about 122 and the idlest 77, far outside
the 10% balance the issue asks for. So each node gets a quota, ``floor`` or
``ceil`` of the fair share (which nodes get the ``ceil`` is itself decided
by a stable hash), and partitions, in a stable hashed order, go to their
highest-weight node that still has room. Loads are then exact; the price is
that a join or a leave moves about 1.6-1.8 times the minimum (the leaving
node's partitions plus a cascade of ones whose first choice filled up
differently), still a small fraction of the whole.

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

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from epochgc.storage.keys import PartitionId


def _digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def _sort_key(pid: PartitionId) -> tuple[str, int, int]:
    """Partition order without the dataclass's slow generated ``__lt__``."""
    return (pid.topic, pid.revision, pid.partition)


def _partition_bytes(pid: PartitionId) -> bytes:
    return f"{pid.topic}/{pid.revision}/{pid.partition}".encode()


def desired_assignment(
    nodes: Iterable[str], partitions: Iterable[PartitionId]
) -> dict[PartitionId, str]:
    """The owner every node agrees ``pid`` should have, given the live nodes.

    Balanced: every node gets ``floor`` or ``ceil`` of the fair share. Empty
    when there are no nodes.
    """
    node_list = sorted(set(nodes))
    pids = sorted(set(partitions), key=_sort_key)
    if not node_list:
        return {}
    quota_base, extra = divmod(len(pids), len(node_list))
    by_quota_rank = sorted(node_list, key=lambda n: (_digest(b"quota\0" + n.encode()), n))
    room = {n: quota_base + (1 if i < extra else 0) for i, n in enumerate(by_quota_rank)}
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
    node list or the partition set does, and costs about a second of CPU
    for 10,000 partitions and 100 nodes. Not thread-safe; one per caller
    (the simulation shares one among its nodes: the inputs are the same)."""

    _key: tuple[frozenset[str], frozenset[PartitionId]] | None = None
    _value: dict[PartitionId, str] = field(default_factory=dict)
    computed: int = 0

    def get(
        self, nodes: Iterable[str], partitions: Iterable[PartitionId]
    ) -> dict[PartitionId, str]:
        """The desired assignment (computed again only when an input changed).
        Passing a ``frozenset`` of partitions saves copying it every call."""
        key = (frozenset(nodes), frozenset(partitions))
        if key != self._key:
            self._value = desired_assignment(key[0], key[1])
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
