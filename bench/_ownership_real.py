"""The real-S3 half of ``bench_ownership``: the embedded S3 (moto server,
over HTTP), 2,000 partitions, 20 nodes as threads.

* epochgc: every node runs the real ``ReconcilerNode`` over idle
  partitions (``NodeLease`` heartbeat, ``NodeOwnership`` rounds, a
  ``PartitionLeader`` per owned partition at its record's term, reports).
* per-partition leases (the design before): the real ``LeaseManager``
  (still the singleton roles' lease code) driven the way the old
  ``ReconcilerNode`` drove it: each round ``try_acquire`` of every partition
  lease the node does not hold, in sequence (one GET each, a PUT to take
  one), one heartbeat thread renewing every held lease (one PUT each). The
  partitions are not led (no partition-log I/O), so its figures are a
  lower bound of that design's cost. Its phases are capped in time: it
  cannot finish a round of 20 nodes x 2,000 GETs on this machine in the
  time the new design needs for everything; a figure not reached within
  its cap says so.

Every node has its own boto3 client with its own request counter (exact).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field

from bench._failover import RealTime, kill_busiest
from epochgc.leases.holder_codec import decode_owner
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.ownership_round import NodeOwnership
from epochgc.leases.role_leases import LeaseManager
from epochgc.leases.timing import LeasePolicy
from epochgc.reconciler.node import NodeSettings, ReconcilerNode
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import PartitionId, owner_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.partition.replica import PartitionReplica

ROOT = "epochgc"
log = logging.getLogger("epochgc.bench")


@dataclass
class RealResult:
    """The figures of one design on the embedded S3."""

    design: str
    seconds_to_all_owned: float = math.inf
    seconds_to_all_led: float = math.inf
    """Until every partition is led (replica opened, ``term_start``
    written): the reconciler's work on top of ownership."""
    loads: tuple[int, int] = (0, 0)
    requests_per_node_second: float = 0.0
    busiest_node_requests_per_second: float = 0.0
    failover_seconds: float = math.inf
    failover_led_seconds: float = math.inf
    victim_partitions: int = 0
    steady_by_operation: dict[str, float] = field(default_factory=dict)
    """Requests per node per second in steady state, by S3 operation."""
    double_owner_violations: int = -1
    """-1: not checked."""
    notes: list[str] = field(default_factory=list)


def _client(s3: EmbeddedS3, bucket: str) -> tuple[S3ObjectStore, RequestStats]:
    client = make_s3_client(s3.client_settings())
    stats = RequestStats()
    stats.attach(client)
    return S3ObjectStore(client, bucket), stats


def _topics(store: S3ObjectStore, partitions: int, topics: int) -> list[PartitionId]:
    controller = Controller(store, ROOT)
    per = math.ceil(partitions / topics)
    pids: list[PartitionId] = []
    for t in range(topics):
        count = min(per, partitions - len(pids))
        info = controller.create_topic(f"topic-{t:02d}", count)
        pids += [PartitionId(info.name, info.revision, p) for p in range(count)]
    return pids


# --- epochgc: real reconciler nodes --------------------------------------------------


class _NodeThread:
    """One ``ReconcilerNode`` in a thread with its own event loop."""

    def __init__(
        self,
        s3: EmbeddedS3,
        bucket: str,
        name: str,
        policy: LeasePolicy,
        round_seconds: float,
        max_moves: int,
    ) -> None:
        self.store, self.stats = _client(s3, bucket)
        lease = NodeLease(self.store, ROOT, name, policy=policy)
        self.ownership = NodeOwnership(self.store, ROOT, lease, max_moves_per_round=max_moves)
        settings = NodeSettings(
            idle_interval_seconds=1e9,  # idle partitions: no housekeeping appends
            report_interval_seconds=5.0,
            ownership_interval_seconds=round_seconds,
            reconcile_concurrency=8,
        )
        self.node = ReconcilerNode(
            self.store, ROOT, name, self.ownership, LeaderDirectory(), settings=settings
        )
        self.round_seconds = round_seconds
        self.killed = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"bench-{name}", daemon=True)

    def _run(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        stop = asyncio.Event()

        async def watch() -> None:
            while not (self.killed.is_set() or self.stopped.is_set()):
                await asyncio.sleep(0.02)
            if self.killed.is_set():
                # kill -9: the heartbeat stops, nothing is released (the
                # node's own stop() afterwards releases nothing either)
                self.ownership.stop(release=False)
            stop.set()

        watcher = asyncio.create_task(watch())
        self.ownership.start()
        await self.node.run(stop, round_interval_seconds=self.round_seconds)
        await watcher

    def led(self) -> set[PartitionId]:
        return set(self.node.led_partitions()) if not self.killed.is_set() else set()

    def owned(self) -> set[PartitionId]:
        return set(self.ownership.owned()) if not self.killed.is_set() else set()


def run_node_leases(s3: EmbeddedS3, args: argparse.Namespace, policy: LeasePolicy) -> RealResult:
    a = args
    bucket = "bench-own-new"
    s3.create_bucket(bucket)
    setup, _ = _client(s3, bucket)
    pids = _topics(setup, a.real_partitions, a.real_topics)
    result = RealResult("node leases (epochgc)")
    nodes = [
        _NodeThread(s3, bucket, f"node-{i:02d}", policy, a.real_round, a.real_max_moves)
        for i in range(a.real_nodes)
    ]
    started = time.monotonic()
    for n in nodes:
        n.thread.start()
    want = set(pids)
    deadline = started + a.real_start_cap
    phase = _PhaseLog("start", nodes, len(want))
    while time.monotonic() < deadline and math.isinf(result.seconds_to_all_led):
        time.sleep(0.1)
        now = time.monotonic() - started
        owned = set().union(*(n.owned() for n in nodes))
        led = set().union(*(n.led() for n in nodes))
        phase.maybe(len(owned), len(led))
        if math.isinf(result.seconds_to_all_owned) and owned == want:
            result.seconds_to_all_owned = now
        if led == want:
            result.seconds_to_all_led = now
    # settle into balance, then steady state
    fair = len(pids) / len(nodes)
    phase = _PhaseLog("balance", nodes, len(want))
    while time.monotonic() < deadline:
        loads = [len(n.owned()) for n in nodes]
        phase.maybe(sum(loads), len(set().union(*(n.led() for n in nodes))))
        if max(loads) <= fair * 1.1 and min(loads) >= fair * 0.9 and sum(loads) == len(pids):
            break
        time.sleep(0.2)
    time.sleep(2 * a.real_round)
    result.loads = (max(len(n.owned()) for n in nodes), min(len(n.owned()) for n in nodes))
    _steady(result, [n.stats for n in nodes], a.real_steady)
    # kill -9 of the node that owns the most
    failover = kill_busiest(nodes, _NodeThread.owned, _kill, RealTime(0.05))
    victims, others = failover.partitions, failover.others
    result.victim_partitions = len(victims)
    phase = _PhaseLog("failover", others, len(victims))
    seconds = failover.time(
        {
            "owned": lambda: failover.taken_over(_NodeThread.owned),
            "led": lambda: failover.taken_over(_NodeThread.led),
        },
        limit_seconds=policy.ttl_seconds + a.real_failover_cap,
        on_poll=lambda: phase.maybe(
            len(victims & set().union(*(n.owned() for n in others))),
            len(victims & set().union(*(n.led() for n in others))),
            every=2.0,
        ),
    )
    result.failover_seconds, result.failover_led_seconds = seconds["owned"], seconds["led"]
    for n in others:
        n.stopped.set()
    for n in nodes:
        n.thread.join(30)
    result.double_owner_violations = _check_logs(setup, victims)
    return result


def _kill(node: _NodeThread | _OldNode) -> None:
    """kill -9: the node stops renewing and acting, and releases nothing."""
    node.killed.set()


def _check_logs(store: S3ObjectStore, pids: set[PartitionId]) -> int:
    """From the partition logs of the partitions that changed hands: their
    ``term_start`` terms strictly grow (no two owners ever started the same
    term, so replay counts one owner's appends per term), and the log's
    term is the one its ownership record names. Violations counted."""
    bad = 0
    for pid in sorted(pids, key=str):
        replica = PartitionReplica(store, ROOT, pid)
        state = replica.open()
        terms = []
        for entry in replica.log.read(0).entries:
            doc = json.loads(entry.payload)
            if doc.get("type") == "term_start":
                terms.append(int(doc["term"]))
        record = decode_owner(store.get(owner_key(ROOT, pid)).body, "owner")
        # Not re-led yet (failover not done) is not a violation: the
        # failover figure shows it.
        if any(b <= a for a, b in itertools.pairwise(terms)) or (
            terms and (state.term != terms[-1] or record.term < state.term)
        ):
            bad += 1
    return bad


class _PhaseLog:
    """A line every few seconds while a phase waits: partitions owned and
    led, and the nodes' request rate by operation since the last line
    (where the time of a slow phase goes)."""

    def __init__(self, phase: str, nodes: list[_NodeThread], total: int) -> None:
        self.phase, self.nodes, self.total = phase, nodes, total
        self.started = self.last = time.monotonic()
        self.counts = self._counts()

    def _counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in self.nodes:
            for op, c in n.stats.by_operation().items():
                out[op] = out.get(op, 0) + c
        return out

    def maybe(self, owned: int, led: int, every: float = 5.0) -> None:
        now = time.monotonic()
        if now - self.last < every:
            return
        counts = self._counts()
        rates = {op: (c - self.counts.get(op, 0)) / (now - self.last) for op, c in counts.items()}
        self.counts, self.last = counts, now
        by_op = ", ".join(f"{op} {r:.0f}" for op, r in sorted(rates.items()) if r >= 0.5)
        log.info(
            "%s +%.0fs: owned %d/%d, led %d/%d; requests/s %.0f (%s)",
            self.phase,
            now - self.started,
            owned,
            self.total,
            led,
            self.total,
            sum(rates.values()),
            by_op,
        )


def _steady(result: RealResult, stats: list[RequestStats], seconds: float) -> None:
    before = [s.by_operation() for s in stats]
    time.sleep(seconds)
    after = [s.by_operation() for s in stats]
    counts = [sum(a.values()) - sum(b.values()) for a, b in zip(after, before, strict=True)]
    result.requests_per_node_second = sum(counts) / len(counts) / seconds
    result.busiest_node_requests_per_second = max(counts) / seconds
    ops = {op for a in after for op in a}
    result.steady_by_operation = {
        op: sum(a.get(op, 0) - b.get(op, 0) for a, b in zip(after, before, strict=True))
        / len(stats)
        / seconds
        for op in sorted(ops)
    }


# --- the design before: one lease per partition -----------------------------------------


class _OldNode:
    """The old node's lease behaviour with the real ``LeaseManager``."""

    def __init__(
        self,
        s3: EmbeddedS3,
        bucket: str,
        name: str,
        policy: LeasePolicy,
        pids: list[PartitionId],
        round_seconds: float,
    ) -> None:
        self.round_seconds = round_seconds
        self.store, self.stats = _client(s3, bucket)
        self.leases = LeaseManager(self.store, ROOT, name, policy=policy)
        self.names = {pid: f"partition.{pid.topic}.{pid.revision}.{pid.partition}" for pid in pids}
        self.killed = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"bench-old-{name}", daemon=True)

    def _run(self) -> None:
        self.leases.start()
        while not (self.killed.is_set() or self.stopped.is_set()):
            held = set(self.leases.held())
            for name in self.names.values():
                if self.killed.is_set() or self.stopped.is_set():
                    break
                if name not in held:
                    try:
                        self.leases.try_acquire(name)
                    except Exception as err:
                        log.warning("old design: %s", err)
            self.stopped.wait(self.round_seconds)  # the old node's pause between rounds
        self.leases.stop(release=not self.killed.is_set())

    def led(self) -> set[PartitionId]:
        if self.killed.is_set():
            return set()
        held = set(self.leases.held())
        return {pid for pid, name in self.names.items() if name in held}


def run_partition_leases(
    s3: EmbeddedS3, args: argparse.Namespace, policy: LeasePolicy
) -> RealResult:
    a = args
    bucket = "bench-own-old"
    s3.create_bucket(bucket)
    setup, _ = _client(s3, bucket)
    pids = _topics(setup, a.real_partitions, a.real_topics)
    result = RealResult("per-partition leases (before)")
    nodes = [
        _OldNode(s3, bucket, f"node-{i:02d}", policy, pids, a.real_round)
        for i in range(a.real_nodes)
    ]
    started = time.monotonic()
    for n in nodes:
        n.thread.start()
    want = set(pids)
    deadline = started + a.real_start_cap
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if set().union(*(n.led() for n in nodes)) == want:
            result.seconds_to_all_owned = time.monotonic() - started
            break
    if math.isinf(result.seconds_to_all_owned):
        result.notes.append(f"not every partition owned within {a.real_start_cap:g}s")
    result.loads = (max(len(n.led()) for n in nodes), min(len(n.led()) for n in nodes))
    _steady(result, [n.stats for n in nodes], a.real_steady)
    failover = kill_busiest(nodes, _OldNode.led, _kill, RealTime(0.2))
    result.victim_partitions = len(failover.partitions)
    limit = policy.ttl_seconds + a.real_failover_cap
    seconds = failover.time(
        {"owned": lambda: failover.taken_over(_OldNode.led)}, limit_seconds=limit
    )
    result.failover_seconds = seconds["owned"]
    if math.isinf(result.failover_seconds):
        result.notes.append(
            f"the killed node's {len(failover.partitions)} partitions not all owned again "
            f"within {limit:g}s"
        )
    for n in failover.others:
        n.stopped.set()
    for n in nodes:
        n.thread.join(60)
    return result
