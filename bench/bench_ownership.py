"""Partition ownership at scale, simulated: one lease per node plus
ownership records (epochgc's node ownership code) against today's one
lease per partition (issue 16).

Both run on the in-memory CAS store (``tests/support/memory_store.py``)
with a virtual clock: no HTTP, no sleeping; rounds are driven by the clock,
each node's rounds at its own phase within the round interval. Scenario:
every node starts (leases acquired within the first 0.1 s, first rounds
spread over the first round interval), steady state, the node owning the
most partitions is killed (stops renewing and acting, releases nothing),
then a new node joins.

* epochgc: the real ``NodeLease`` + ``NodeOwnership`` (``ClusterView``
  LISTs, ``plan_round``, ``OwnershipStore`` CAS writes) of every node.
* today: a model of ``reconciler/node.py`` with ``leases.py``: each round a
  node GETs every partition lease it does not hold (one GET each, in
  sequence) and takes any missing or unchanged for a TTL since it first saw
  that version; it renews every lease it holds (one PUT each) every renew
  interval. Counted, not run through ``LeaseManager``: a million lease
  reads per round would take minutes of CPU.

Virtual time has no request latency. ``--latency-ms`` turns the counts into
what a node's sequential requests cost per round against real S3, which is
where today's design breaks (rounds of minutes, renewals slower than the
TTL).

Then the real-S3 half (``bench/_ownership_real.py``): the embedded S3,
2,000 partitions, 20 nodes, each an ``epochgc reconciler`` process, measured
from the bucket, the busiest killed with SIGKILL in three scenarios (plain,
while the survivors still open partitions, beside a busy neighbour), each
on fresh clusters; against the real ``LeaseManager`` driven the way the
per-partition design drove it, with the product's default timings (TTL
15 s, renewals and ownership rounds every 5 s). Shorter ones measure the
embedded server more than epochgc: it serves one request at a time, a
1000-key LIST page in about 150 ms, where S3 serves them side by side. The
verdict covers both halves.

Run from the repository root: ``python -m bench.bench_ownership``.
"""

from __future__ import annotations

import argparse
import heapq
import logging
import math
import sys
import time
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, field
from typing import TypeVar

from bench._failover import Failover, VirtualTime, kill_busiest
from bench._harness import figures, setup_logging, verdict
from bench._ownership_real import (
    SCENARIOS,
    RealResult,
    run_node_leases,
    run_partition_leases,
)
from epochgc.leases.assignment import AssignmentCache
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.ownership_round import NodeOwnership
from epochgc.leases.timing import LeasePolicy
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import PartitionId
from tests.support.memory_store import MemoryStore, VirtualClock

ROOT = "epochgc"
P = TypeVar("P")
START_AT = 1.0
"""First rounds begin here; leases are acquired in the 0.1 s before."""


@dataclass
class Result:
    """The figures of one design."""

    design: str
    rounds_to_all_owned: float = math.inf
    start_loads: tuple[int, int] = (0, 0)
    rounds_to_balanced_at_start: float = math.inf
    renew_puts_per_node_interval: float = 0.0
    renew_puts_max_node_interval: float = 0.0
    list_pages_per_node_round: float = 0.0
    gets_per_node_round: float = 0.0
    puts_per_node_round: float = 0.0
    meta_requests_per_second: float = 0.0
    failover_seconds: float = math.inf
    victim_partitions: int = 0
    loads_after_failover: tuple[int, int] = (0, 0)
    rounds_to_balanced_after_join: float = math.inf
    join_loads: tuple[int, int] = (0, 0)
    double_owned: int = 0
    sequential_requests_per_round_max: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)


def partition_ids(count: int, topics: int = 10) -> list[PartitionId]:
    per_topic = math.ceil(count / topics)
    return [PartitionId(f"topic-{i // per_topic:02d}", 7, i % per_topic) for i in range(count)]


def balanced(loads: list[int], total: int) -> bool:
    fair = total / len(loads)
    return max(loads) <= fair * 1.1 and min(loads) >= fair * 0.9


class Scheduler:
    """Each node's rounds at its own phase, in virtual-time order."""

    def __init__(self, clock: VirtualClock, round_seconds: float) -> None:
        self.clock = clock
        self.round_seconds = round_seconds
        self._heap: list[tuple[float, int, str]] = []
        self._seq = 0
        self.stopped: set[str] = set()

    def schedule(self, node: str, at: float) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, node))

    def run_until(self, end: float, step: Callable[[str], None]) -> None:
        while self._heap and self._heap[0][0] < end:
            at, _seq, node = heapq.heappop(self._heap)
            if node in self.stopped:
                continue
            self.clock.advance(max(0.0, at - self.elapsed()))
            step(node)
            self.schedule(node, at + self.round_seconds)
        self.clock.advance(max(0.0, end - self.elapsed()))

    def elapsed(self) -> float:
        return self.clock.monotonic() - CLOCK_ORIGIN

    def kill_busiest(
        self,
        nodes: Iterable[str],
        holding: Callable[[str], Set[P]],
        step: Callable[[str], None],
    ) -> Failover[str, P]:
        """kill -9 of the node holding the most (the greatest name on a tie):
        its rounds stop; the failover is timed in polls of 1/20 round."""
        clock = VirtualTime(
            self.elapsed, lambda at: self.run_until(at, step), self.round_seconds / 20
        )
        return kill_busiest(sorted(nodes, reverse=True), holding, self.stopped.add, clock)


CLOCK_ORIGIN = VirtualClock().monotonic()


# --- epochgc: node leases and ownership records ------------------------------------


class NodeOwnershipSim:
    """Every node runs the real ownership code on one in-memory store."""

    def __init__(self, args: argparse.Namespace, policy: LeasePolicy) -> None:
        self.args = args
        self.policy = policy
        self.clock = VirtualClock()
        self.store = MemoryStore(self.clock)
        self.partitions = frozenset(partition_ids(args.partitions))
        self.cache = AssignmentCache()
        self.nodes: dict[str, NodeOwnership] = {}
        self.leases: dict[str, NodeLease] = {}
        self.sched = Scheduler(self.clock, args.round_seconds)
        self.claims: dict[PartitionId, str] = {}
        self.double_owned = 0
        self.max_sequential = 0
        self.renewals_in_window: dict[str, int] = {}

    def add_node(self, name: str, first_round_at: float) -> None:
        lease = NodeLease(
            self.store,
            ROOT,
            name,
            policy=self.policy,
            now=self.clock.now,
            monotonic=self.clock.monotonic,
        )
        if not lease.try_acquire():
            raise RuntimeError(f"{name} could not acquire its node lease")
        self.leases[name] = lease
        self.nodes[name] = NodeOwnership(
            self.store,
            ROOT,
            lease,
            max_moves_per_round=self.args.max_moves,
            now=self.clock.now,
            monotonic=self.clock.monotonic,
            assignments=self.cache,
            write_concurrency=1,  # virtual time: no latency to overlap
        )
        self.sched.schedule(name, first_round_at)

    def step(self, name: str) -> None:
        node = self.nodes[name]
        before = node.owned()
        requests_before = self.store.count()
        self.leases[name].renew_if_due()
        node.run_round(self.partitions)
        self.max_sequential = max(self.max_sequential, self.store.count() - requests_before)
        for pid in node.owned() - before:
            previous = self.claims.get(pid)
            if previous is not None and previous != name and pid in self.nodes[previous].owned():
                self.double_owned += 1
            self.claims[pid] = name

    def loads(self) -> list[int]:
        return [len(n.owned()) for name, n in self.nodes.items() if name not in self.sched.stopped]

    def owned_total(self) -> int:
        return sum(len(n.owned()) for n in self.nodes.values())

    def run(self) -> Result:
        args, rnd = self.args, self.args.round_seconds
        result = Result("node leases (epochgc)")
        names = [f"node-{i:03d}" for i in range(args.nodes)]
        for i, name in enumerate(names):
            self.clock.advance(0.1 / args.nodes)
            self.add_node(name, START_AT + i * rnd / args.nodes)
        # start: watch every node step until everything is owned and balanced
        end = START_AT + args.start_rounds * rnd
        t = START_AT
        while t < end:
            t = min(end, t + rnd / 4)
            self.sched.run_until(t, self.step)
            if math.isinf(result.rounds_to_all_owned) and self.owned_total() == args.partitions:
                result.rounds_to_all_owned = math.ceil((t - START_AT) / rnd * 4) / 4
            if math.isinf(result.rounds_to_balanced_at_start) and balanced(
                self.loads(), args.partitions
            ):
                result.rounds_to_balanced_at_start = math.ceil((t - START_AT) / rnd * 4) / 4
            if t == START_AT + 3 * rnd:
                result.start_loads = (max(self.loads()), min(self.loads()))
        # steady state: exact request counts over whole renew intervals
        self.store.reset_counts()
        renewed_before = {n: lease.stats["renewals"] for n, lease in self.leases.items()}
        window = args.steady_rounds * rnd
        steady_from = self.sched.elapsed()
        self.max_sequential = 0
        self.sched.run_until(steady_from + window, self.step)
        result.sequential_requests_per_round_max = self.max_sequential
        self.renewals_in_window = {
            n: lease.stats["renewals"] - renewed_before[n] for n, lease in self.leases.items()
        }
        count = self.store.count
        nodes_prefix, owners_prefix = f"{ROOT}/meta/nodes/", f"{ROOT}/meta/owners/"
        intervals = window / self.policy.renew_interval_seconds
        result.renew_puts_per_node_interval = (
            count("PutObject", nodes_prefix) / args.nodes / intervals
        )
        result.renew_puts_max_node_interval = max(self.renewals_in_window.values()) / intervals
        rounds = window / rnd
        result.list_pages_per_node_round = count("ListObjectsV2") / args.nodes / rounds
        result.gets_per_node_round = count("GetObject") / args.nodes / rounds
        result.puts_per_node_round = count("PutObject", owners_prefix) / args.nodes / rounds
        result.meta_requests_per_second = count(prefix=f"{ROOT}/meta/") / window
        # kill -9 of the node that owns the most
        failover = self.sched.kill_busiest(self.nodes, lambda n: self.nodes[n].owned(), self.step)
        victim = failover.victim
        result.victim_partitions = len(failover.partitions)
        result.failover_seconds = failover.time(
            {
                "owned": lambda: all(
                    self.claims.get(p, victim) != victim and p in self.nodes[self.claims[p]].owned()
                    for p in failover.partitions
                )
            },
            limit_seconds=self.policy.ttl_seconds + 8 * rnd,
        )["owned"]
        self.sched.run_until(failover.killed_at + self.policy.ttl_seconds + 6 * rnd, self.step)
        result.loads_after_failover = (max(self.loads()), min(self.loads()))
        # a node joins
        joined_at = self.sched.elapsed()
        self.add_node("node-new", joined_at + rnd / 2)
        t = joined_at
        while t < joined_at + args.start_rounds * rnd:
            t += rnd / 4
            self.sched.run_until(t, self.step)
            loads = self.loads()
            if (
                math.isinf(result.rounds_to_balanced_after_join)
                and balanced(loads, args.partitions)
                and sum(loads) == args.partitions
            ):
                result.rounds_to_balanced_after_join = math.ceil((t - joined_at) / rnd * 4) / 4
        result.join_loads = (max(self.loads()), min(self.loads()))
        result.double_owned = self.double_owned
        result.extra["assignments computed"] = str(self.cache.computed)
        return result


# --- today: one lease per partition -------------------------------------------------


class PartitionLeaseSim:
    """Counts what ``reconciler/node.py`` + ``leases.py`` do each round."""

    def __init__(self, args: argparse.Namespace, policy: LeasePolicy) -> None:
        self.args = args
        self.policy = policy
        self.clock = VirtualClock()
        self.sched = Scheduler(self.clock, args.round_seconds)
        self.holder: dict[int, str | None] = dict.fromkeys(range(args.partitions))
        self.written_at: dict[int, float] = {}
        self.held: dict[str, set[int]] = {}
        self.phase: dict[str, float] = {}
        self.last_renew: dict[str, float] = {}
        self.gets = 0
        self.puts = 0
        self.renew_puts: dict[str, int] = {}
        self.free: set[int] = set(range(args.partitions))
        """Partitions whose lease is missing or held by a killed node."""
        self.max_sequential = 0

    def add_node(self, name: str, first_round_at: float) -> None:
        self.held[name] = set()
        self.phase[name] = first_round_at
        self.last_renew[name] = -math.inf
        self.renew_puts[name] = 0
        self.sched.schedule(name, first_round_at)

    def first_sight(self, name: str, written: float) -> float:
        """``name``'s first round at or after ``written`` (it GETs every
        lease it does not hold each round, so that is when it sees it)."""
        rnd: float = self.args.round_seconds
        phase = self.phase[name]
        return phase + max(0, math.ceil((written - phase) / rnd)) * rnd

    def step(self, name: str) -> None:
        now = self.sched.elapsed()
        mine = self.held[name]
        requests = 0
        if now - self.last_renew[name] >= self.policy.renew_interval_seconds:
            self.puts += len(mine)
            self.renew_puts[name] += len(mine)
            requests += len(mine)
            for p in mine:
                self.written_at[p] = now
            self.last_renew[name] = now
        gets = self.args.partitions - len(mine)
        self.gets += gets
        requests += gets
        for p in sorted(self.free):
            owner = self.holder[p]
            if owner is not None:
                seen = self.first_sight(name, self.written_at[p])
                if now - seen < self.policy.ttl_seconds:
                    continue
                self.held[owner].discard(p)
            self.holder[p] = name
            self.written_at[p] = now
            mine.add(p)
            self.free.discard(p)
            self.puts += 1
            requests += 1
        self.max_sequential = max(self.max_sequential, requests)

    def loads(self) -> list[int]:
        return [len(h) for n, h in self.held.items() if n not in self.sched.stopped]

    def run(self) -> Result:
        args, rnd = self.args, self.args.round_seconds
        result = Result("per-partition leases (today)")
        names = [f"node-{i:03d}" for i in range(args.nodes)]
        for i, name in enumerate(names):
            self.add_node(name, START_AT + i * rnd / args.nodes)
        t = START_AT
        end = START_AT + args.start_rounds * rnd
        while t < end:
            t = min(end, t + rnd / 4)
            self.sched.run_until(t, self.step)
            if math.isinf(result.rounds_to_all_owned) and not self.free:
                result.rounds_to_all_owned = math.ceil((t - START_AT) / rnd * 4) / 4
            if math.isinf(result.rounds_to_balanced_at_start) and balanced(
                self.loads(), args.partitions
            ):
                result.rounds_to_balanced_at_start = math.ceil((t - START_AT) / rnd * 4) / 4
            if t == START_AT + 3 * rnd:
                result.start_loads = (max(self.loads()), min(self.loads()))
        gets0, puts0 = self.gets, self.puts
        renew0 = dict(self.renew_puts)
        window = args.steady_rounds * rnd
        steady_from = self.sched.elapsed()
        self.max_sequential = 0
        self.sched.run_until(steady_from + window, self.step)
        result.sequential_requests_per_round_max = self.max_sequential
        intervals = window / self.policy.renew_interval_seconds
        renewals = [self.renew_puts[n] - renew0[n] for n in names]
        result.renew_puts_per_node_interval = sum(renewals) / args.nodes / intervals
        result.renew_puts_max_node_interval = max(renewals) / intervals
        rounds = window / rnd
        result.gets_per_node_round = (self.gets - gets0) / args.nodes / rounds
        result.meta_requests_per_second = (self.gets - gets0 + self.puts - puts0) / window
        failover = self.sched.kill_busiest(self.held, self.held.__getitem__, self.step)
        self.free |= failover.partitions  # the killed node's leases expire
        result.victim_partitions = len(failover.partitions)
        result.failover_seconds = failover.time(
            {"owned": lambda: not (failover.partitions & self.held[failover.victim])},
            limit_seconds=self.policy.ttl_seconds + 8 * rnd,
        )["owned"]
        self.sched.run_until(failover.killed_at + self.policy.ttl_seconds + 6 * rnd, self.step)
        result.loads_after_failover = (max(self.loads()), min(self.loads()))
        joined_at = self.sched.elapsed()
        self.add_node("node-new", joined_at + rnd / 2)
        t = joined_at
        while t < joined_at + args.start_rounds * rnd:
            t += rnd / 4
            self.sched.run_until(t, self.step)
            if math.isinf(result.rounds_to_balanced_after_join) and balanced(
                self.loads(), args.partitions
            ):
                result.rounds_to_balanced_after_join = math.ceil((t - joined_at) / rnd * 4) / 4
        result.join_loads = (max(self.loads()), min(self.loads()))
        return result


# --- report -----------------------------------------------------------------------------


def fmt(value: float, digits: int = 2) -> str:
    if math.isinf(value):
        return "never"
    return f"{value:,.{digits}f}"


def secs(value: float) -> str:
    """Seconds in the verdict line: ``12.3s``, or ``never``."""
    return "never" if math.isinf(value) else f"{value:.1f}s"


def table(rows: list[tuple[str, str, str]]) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}}  {'node leases (epochgc)':>24}  {'per-partition leases':>24}")
    for label, ours, theirs in rows:
        print(f"{label:{width}}  {ours:>24}  {theirs:>24}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--ttl", type=float, default=15.0)
    parser.add_argument("--renew", type=float, default=5.0)
    parser.add_argument("--skew-margin", type=float, default=2.0)
    parser.add_argument("--round-seconds", type=float, default=5.0)
    parser.add_argument("--max-moves", type=int, default=128)
    parser.add_argument("--start-rounds", type=int, default=6)
    parser.add_argument("--steady-rounds", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--real-partitions", type=int, default=2000)
    parser.add_argument("--real-topics", type=int, default=10)
    parser.add_argument("--real-nodes", type=int, default=20)
    # The product's defaults ([lease] ttl 15 s, renew 5 s; [ownership]
    # rounds every 5 s and 128 moves, above the fair share of 100).
    parser.add_argument("--real-ttl", type=float, default=15.0)
    parser.add_argument("--real-renew", type=float, default=5.0)
    parser.add_argument("--real-round", type=float, default=5.0)
    parser.add_argument("--real-max-moves", type=int, default=128)
    parser.add_argument("--real-start-cap", type=float, default=90.0)
    parser.add_argument("--real-steady", type=float, default=15.0)
    parser.add_argument("--real-failover-cap", type=float, default=20.0)
    parser.add_argument(
        "--real-lead-cap",
        type=float,
        default=240.0,
        help="seconds the real half waits for every partition to be led once owned",
    )
    parser.add_argument(
        "--real-runs", type=int, default=3, help="fresh clusters per failover scenario"
    )
    parser.add_argument(
        "--real-scenarios",
        default=",".join(SCENARIOS),
        help="comma-separated failover scenarios of the real half: "
        + "; ".join(f"{k}: {v}" for k, v in SCENARIOS.items()),
    )
    parser.add_argument(
        "--real-poll", type=float, default=2.0, help="seconds between the bench's reads at start"
    )
    parser.add_argument(
        "--real-poll-failover",
        type=float,
        default=2.0,
        help="seconds between the bench's reads during a failover",
    )
    parser.add_argument(
        "--real-keep-logs",
        action="store_true",
        help="keep the nodes' logs (kept anyway when a run fails or misses its target)",
    )
    parser.add_argument(
        "--no-real-baseline",
        dest="real_baseline",
        action="store_false",
        help="skip the per-partition leases of the real half",
    )
    parser.add_argument("--no-real", action="store_true", help="the simulated half only")
    args = parser.parse_args()
    setup_logging()
    logging.getLogger("epochgc").setLevel(logging.ERROR)
    logging.getLogger("epochgc.bench").setLevel(logging.INFO)  # progress lines
    policy = LeasePolicy(args.ttl, args.renew, args.skew_margin)
    rnd = args.round_seconds
    print(
        f"simulated: {args.partitions:,} partitions, {args.nodes} nodes, TTL {args.ttl:g}s, "
        f"renew every {args.renew:g}s, a round every {rnd:g}s, "
        f"max {args.max_moves} moves per round; virtual clock, in-memory CAS store"
    )
    started = time.perf_counter()
    ours = NodeOwnershipSim(args, policy).run()
    ours_cpu = time.perf_counter() - started
    started = time.perf_counter()
    theirs = PartitionLeaseSim(args, policy).run()
    theirs_cpu = time.perf_counter() - started
    latency = args.latency_ms / 1000
    fair = args.partitions / args.nodes
    list_target = math.ceil(args.partitions / 1000) + math.ceil((args.nodes + 1) / 1000)
    failover_target = args.ttl + 2 * rnd

    def both(figure: Callable[[Result], str]) -> tuple[str, str]:
        return figure(ours), figure(theirs)

    def span(loads: tuple[int, int]) -> str:
        return f"{loads[0]}/{loads[1]}"

    def on_s3(r: Result) -> str:
        return fmt(r.sequential_requests_per_round_max * latency)

    rows = [
        ("rounds until every partition is owned", *both(lambda r: fmt(r.rounds_to_all_owned))),
        (
            f"max/min per node 3 rounds after start (fair {fair:g})",
            *both(lambda r: span(r.start_loads)),
        ),
        (
            "rounds until balanced within 10% at start",
            *both(lambda r: fmt(r.rounds_to_balanced_at_start)),
        ),
        (
            "liveness PUTs per node per renew interval (mean)",
            *both(lambda r: fmt(r.renew_puts_per_node_interval)),
        ),
        (
            "liveness PUTs per renew interval, busiest node",
            *both(lambda r: fmt(r.renew_puts_max_node_interval)),
        ),
        ("LIST pages per node per round", *both(lambda r: fmt(r.list_pages_per_node_round))),
        ("GETs per node per round", *both(lambda r: fmt(r.gets_per_node_round))),
        ("ownership PUTs per node per round (steady)", fmt(ours.puts_per_node_round), "0.00"),
        (
            "requests/s on meta/, cluster-wide (steady)",
            *both(lambda r: fmt(r.meta_requests_per_second, 0)),
        ),
        ("partitions of the killed node", *both(lambda r: str(r.victim_partitions))),
        (
            "failover after kill -9, virtual seconds",
            *both(lambda r: fmt(r.failover_seconds, 1)),
        ),
        ("failover after kill -9, rounds", *both(lambda r: fmt(r.failover_seconds / rnd))),
        ("max/min per node after the failover", *both(lambda r: span(r.loads_after_failover))),
        (
            "rounds until balanced within 10% after a join",
            *both(lambda r: fmt(r.rounds_to_balanced_after_join)),
        ),
        ("max/min per node after the join", *both(lambda r: span(r.join_loads))),
        ("instants with two owners of one partition", str(ours.double_owned), "not checked"),
        (f"longest round of one node at {args.latency_ms:g} ms/request, s", *both(on_s3)),
        ("CPU seconds of the simulation", fmt(ours_cpu, 1), fmt(theirs_cpu, 1)),
    ]
    table(rows)
    print(
        f"at {args.latency_ms:g} ms/request in sequence, today's busiest node needs "
        f"{theirs.renew_puts_max_node_interval * latency:,.0f}s to renew its leases "
        f"(TTL {args.ttl:g}s): "
        + (
            "renewals fall behind the TTL, leadership thrashes"
            if theirs.renew_puts_max_node_interval * latency > args.ttl
            else "within the TTL"
        )
    )
    per_node_rate = 1 / latency
    print(
        "virtual time has no latency, so the times above are what zero latency gives: at "
        f"{args.latency_ms:g} ms/request one node makes at most {per_node_rate:,.0f} "
        f"requests/s in sequence, a round of today's takes "
        f"{theirs.sequential_requests_per_round_max * latency:,.0f}s instead of {rnd:g}s, and "
        f"failover (TTL + 2 such rounds) is about "
        f"{args.ttl + 2 * theirs.sequential_requests_per_round_max * latency:,.0f}s "
        f"(epochgc: {args.ttl + 2 * max(rnd, ours.sequential_requests_per_round_max * latency):g}s)"
    )
    figures(
        f"{ours.renew_puts_per_node_interval:.2f} liveness PUT/node/interval, "
        f"{ours.meta_requests_per_second:,.0f} meta req/s, failover {ours.failover_seconds:.1f}s",
        f"{theirs.renew_puts_max_node_interval:,.0f} renewal PUTs/interval on the busiest node, "
        f"{theirs.meta_requests_per_second:,.0f} meta req/s",
        f"{theirs.meta_requests_per_second / max(ours.meta_requests_per_second, 1e-9):,.0f}x "
        "fewer meta requests",
    )
    checks = {
        "liveness <= 1 PUT/node/interval": ours.renew_puts_max_node_interval <= 1.0,
        f"LIST pages <= {list_target}/round": ours.list_pages_per_node_round <= list_target,
        "balanced within 3 rounds of start": ours.rounds_to_balanced_at_start <= 3,
        f"failover <= {failover_target:g}s": ours.failover_seconds <= failover_target,
        "balanced within 3 rounds of a join": ours.rounds_to_balanced_after_join <= 3,
        "never two owners": ours.double_owned == 0,
    }
    real_figure = "real half skipped (--no-real)"
    if not args.no_real:
        _real, real_checks, real_figure = real_half(args)
        checks.update(real_checks)
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'MISS'} {name}")
    return verdict(
        "ownership",
        f"{real_figure}; simulated {args.partitions:,} partitions/{args.nodes} nodes: "
        f"{ours.renew_puts_max_node_interval:.2f} liveness PUT/node/interval, "
        f"{ours.list_pages_per_node_round:.2f} LIST pages/round, "
        f"balanced in {fmt(ours.rounds_to_balanced_at_start)} rounds at start and "
        f"{fmt(ours.rounds_to_balanced_after_join)} after a join, "
        f"failover {ours.failover_seconds:.1f}s, {ours.double_owned} double owners",
        f"<= 1 PUT, <= {list_target} pages, <= 3 rounds, <= {failover_target:g}s, 0; "
        "real: every partition owned, balanced within 10%, failover <= TTL + 1 round, "
        "liveness + LIST pages per node per second within budget, 0 double owners",
        all(checks.values()),
    )


def real_half(args: argparse.Namespace) -> tuple[RealResult, dict[str, bool], str]:
    """Run both designs on the embedded S3; print them side by side, then
    every failover of every scenario."""
    policy = LeasePolicy(args.real_ttl, args.real_renew, args.real_ttl / 10)
    rnd = args.real_round
    scenarios = args.real_scenarios.split(",")
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        raise SystemExit(f"--real-scenarios: unknown {', '.join(unknown)} (known: {SCENARIOS})")
    print(
        f"real: embedded S3 (moto server over HTTP, a process of its own), "
        f"{args.real_partitions:,} partitions, {args.real_nodes} nodes, each an `epochgc "
        f"reconciler` process, TTL {args.real_ttl:g}s, renew every {args.real_renew:g}s, an "
        f"ownership round every {rnd:g}s; a fresh cluster for each of {args.real_runs} runs of "
        f"{', '.join(scenarios)}"
    )
    with EmbeddedS3(bucket="bench-ownership", in_process=False) as s3:
        started = time.perf_counter()
        ours = run_node_leases(s3, args, policy)
        ours_s = time.perf_counter() - started
        theirs = RealResult("per-partition leases (before)")
        theirs_s = math.nan
        if args.real_baseline:
            started = time.perf_counter()
            theirs = run_partition_leases(s3, args, policy)
            theirs_s = time.perf_counter() - started
    print(
        "  epochgc: `epochgc reconciler` processes, measured from the bucket (records, logs) "
        "and their /metrics, the busiest killed with SIGKILL; before: the real LeaseManager "
        "driven as the old node did by threads of the bench (try_acquire per unheld partition "
        "per round, a heartbeat renewing each held lease), partitions not led (a lower bound "
        "of its cost), phases capped in time"
    )

    def span(loads: tuple[int, int]) -> str:
        return f"{loads[0]}/{loads[1]}"

    def skipped(text: str) -> str:
        return text if args.real_baseline else "skipped"

    fair = args.real_partitions / args.real_nodes
    runs = ours.failovers
    rows = [
        (
            "seconds until every node is registered",
            fmt(ours.seconds_to_all_registered, 1),
            "-",
        ),
        (
            "seconds until every partition has an owner",
            fmt(ours.seconds_to_all_owned, 1),
            skipped(fmt(theirs.seconds_to_all_owned, 1)),
        ),
        ("seconds until every partition is led", fmt(ours.seconds_to_all_led, 1), "-"),
        (
            f"max/min partitions per node (fair {fair:g})",
            span(ours.loads),
            skipped(span(theirs.loads)),
        ),
        (
            "requests per node per second (steady, mean)",
            fmt(ours.requests_per_node_second),
            skipped(fmt(theirs.requests_per_node_second)),
        ),
        (
            "requests per second, busiest node (steady)",
            fmt(ours.busiest_node_requests_per_second),
            skipped(fmt(theirs.busiest_node_requests_per_second)),
        ),
        (
            "partitions of the killed node (most)",
            str(ours.victim_partitions),
            skipped(str(theirs.victim_partitions)),
        ),
        (
            f"seconds from kill -9 until all owned again (worst of {len(runs)})",
            fmt(ours.failover_seconds, 1),
            skipped(fmt(theirs.failover_seconds, 1)),
        ),
        (
            "seconds from kill -9 until all led again (worst, killed once all led)",
            fmt(ours.failover_led_seconds, 1),
            "-",
        ),
        (
            "partition logs with two owners counting",
            str(ours.double_owner_violations),
            "not checked",
        ),
        ("wall seconds of this part", fmt(ours_s, 1), skipped(fmt(theirs_s, 1))),
    ]
    table(rows)
    for label, r in (("epochgc", ours), ("before", theirs)):
        by_op = ", ".join(
            f"{op} {rate:.2f}" for op, rate in r.steady_by_operation.items() if rate >= 0.005
        )
        if by_op:
            print(f"  {label}: steady requests per node per second by operation: {by_op}")
    print(
        f"  the bench's own reads of the bucket: {ours.observer_requests_per_second:.1f} "
        "requests/s over the epochgc runs"
    )
    for note in ours.notes:
        print(f"  epochgc: {note}")
    for note in theirs.notes:
        print(f"  before: {note}")
    failover_target = args.real_ttl + rnd
    for f in runs:
        print(
            f"  failover {f.scenario} run {f.run}: {f.victim or '-'} killed owning "
            f"{f.partitions} partitions {f.renewed_before_kill:.1f}s after its last renewal "
            f"({f.led_at_kill}/{args.real_partitions} led at the kill); owned again in "
            f"{secs(f.seconds)} (acknowledged {secs(f.acknowledged_seconds)}, seen by "
            f"{secs(f.seen_seconds)}), led again in {secs(f.led_seconds)}; start: owned "
            f"{secs(f.seconds_to_all_owned)}, led {secs(f.seconds_to_all_led)}; "
            f"{f.double_owner_violations} logs with two owners" + "".join(f"; {n}" for n in f.notes)
        )
    pages = math.ceil(args.real_partitions / 1000) + 1
    # liveness: one renewal per renew interval; ownership: the LIST pages of
    # a round; the reconciler round's controller read (one LIST per round,
    # the same in either design) and the node report every 5 s.
    budget = 1 / args.real_renew + pages / rnd + 1 / rnd + 1 / 5.0
    checks = {
        "real: every partition owned (every run)": bool(runs)
        and all(not math.isinf(f.seconds_to_all_owned) for f in runs),
        "real: balanced within 10%": ours.loads[0] <= fair * 1.1 and ours.loads[1] >= fair * 0.9,
        f"real: <= {budget:.1f} requests/node/s (steady)": (
            ours.busiest_node_requests_per_second <= budget
        ),
    }
    for scenario in scenarios:
        mine = [f for f in runs if f.scenario == scenario]
        checks[f"real: failover <= {failover_target:g}s, {scenario} (every run)"] = bool(
            mine
        ) and all(f.seconds <= failover_target for f in mine)
    checks["real: never two owners (partition logs)"] = ours.double_owner_violations == 0
    by_scenario = "; ".join(
        f"{s} " + "/".join(secs(f.seconds) for f in runs if f.scenario == s) for s in scenarios
    )
    figure = (
        f"real {args.real_partitions:,}/{args.real_nodes} processes: owned in "
        f"{secs(ours.seconds_to_all_owned)} (before "
        f"{skipped(secs(theirs.seconds_to_all_owned))}), "
        f"{ours.requests_per_node_second:.1f} req/node/s (before "
        f"{skipped(f'{theirs.requests_per_node_second:.1f}')}), failover {by_scenario} "
        f"(before {skipped(secs(theirs.failover_seconds))}), loads {span(ours.loads)}"
    )
    return ours, checks, figure


if __name__ == "__main__":
    sys.exit(main())
