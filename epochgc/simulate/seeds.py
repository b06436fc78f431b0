"""One simulated run per seed, many seeds on all cores, and the shrinking
of a failing run's fault schedule.

A seed fixes everything: the cluster's shape, every process's clock
offset and drift, the fault schedule, the store's latencies and faults,
and the order of work due at one instant. Each concern draws from its own
random stream named after the seed, so that dropping a fault (shrinking)
leaves the cluster as it was. The trace (every request, fault and
ownership change, with its virtual time) is hashed: the same seed gives
the same hash, in any process whose ``PYTHONHASHSEED`` is the same
(``run_seeds`` pins it to 0 for its workers: sets of strings iterate in
hash order).
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import random
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

from epochgc.leases.timing import LeasePolicy
from epochgc.reconciler.watchdog import OWNERSHIP_LOOP, ROUNDS_LOOP
from epochgc.simulate.cluster import ROOT, TOPICS, ClusterSettings, Violation, World
from epochgc.simulate.fault_schedule import Fault, draw_schedule
from epochgc.simulate.simulated_store import Network
from epochgc.simulate.virtual_time import Scheduler
from epochgc.storage.keys import PartitionId
from epochgc.verify.unsafe_rule import unsafe_max_applied_rule
from epochgc.watermarks.safe_epoch.reports import safe_epoch_rule

DEFAULT_SECONDS = 600.0
"""Virtual seconds of faults in the default scenario (the heal follows)."""
TRACE_TAIL = 50
GATEWAY_OFF_SHARE = 0.3
"""Share of seeds with one gateway whose clock is 10 to 60 s off."""
SHRINK_RUNS = 100
"""Most re-runs spent shrinking one failing seed's fault schedule."""
SHRINK_MARGIN_SECONDS = 60.0
"""How long past the original violation a shrinking re-run goes on."""


class Trace:
    """The run's events: hashed as they come, the last ``TRACE_TAIL`` kept."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._hash = hashlib.blake2b(digest_size=16)
        self.tail: deque[str] = deque(maxlen=TRACE_TAIL)
        self.events = 0

    def add(self, line: str) -> None:
        text = f"{self._clock():10.4f} {line}"
        self._hash.update(text.encode() + b"\n")
        self.tail.append(text)
        self.events += 1

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()


class _TraceHandler(logging.Handler):
    """The product's own log lines, into the trace (and nowhere else)."""

    def __init__(self, trace: Trace) -> None:
        super().__init__(logging.INFO)
        self._trace = trace

    def emit(self, record: logging.LogRecord) -> None:
        self._trace.add(f"log {record.levelname} {record.getMessage()}")


@contextmanager
def _logs_into(trace: Trace) -> Iterator[None]:
    logger = logging.getLogger("epochgc")
    handler = _TraceHandler(trace)
    saved = (logger.level, logger.propagate, logger.handlers[:])
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.handlers[:] = saved[2]


@dataclass(frozen=True)
class Scenario:
    """The cluster a seed builds."""

    nodes: tuple[str, ...]
    spare: tuple[str, ...]
    """Node ids that may join."""
    partitions: tuple[PartitionId, ...]
    gateways: tuple[float, ...]
    """Each gateway's clock offset, seconds."""
    producers: int = 1
    """One, or two whose epoch caches age apart: a partition then gets
    placeholders at the window's previous epoch and at a new one within
    one reconciliation pass."""
    collectors: int = 1
    """One, or two whose rounds run out of phase (``simulate/data_path.py``)."""


def scenario_of(seed: int) -> Scenario:
    """3 to 5 nodes, 2 topics of 2 to 4 partitions, one or two producers
    and one or two collectors, up to three gateways
    whose clocks are apart by up to 0.9 s (what the lease rules assume:
    ``leases/timing.py``), and in some seeds one gateway far off (which
    they must notice: ``GATEWAY_OFF_SHARE``)."""
    rng = _stream(seed, "cluster")
    count = rng.randint(3, 5)
    nodes = tuple(f"node-{i}" for i in range(1, count + 1))
    spare = tuple(f"node-{i}" for i in range(count + 1, count + 3))
    partitions = tuple(
        PartitionId(topic, revision, p)
        for revision, topic in enumerate(TOPICS, start=1)
        for p in range(rng.randint(2, 4))
    )
    gateways = (0.0, *(rng.uniform(-0.45, 0.45) for _ in range(rng.randint(0, 2))))
    if rng.random() < GATEWAY_OFF_SHARE:
        # A gateway whose clock is far off: its stamps contradict what the
        # nodes saw, which the lease rules must notice and stop using.
        gateways = (*gateways, rng.choice((-1, 1)) * rng.uniform(10.0, 60.0))
    # Drawn last, so the draws above are each seed's as they were.
    producers = rng.randint(1, 2)
    # Drawn last, for the same reason.
    collectors = rng.randint(1, 2)
    return Scenario(nodes, spare, partitions, gateways, producers, collectors)


def _stream(seed: int, purpose: str) -> random.Random:
    return random.Random(f"epochgc-simulate/{seed}/{purpose}")


@dataclass
class SeedResult:
    """What one run of one seed found."""

    seed: int
    trace_hash: str
    events: int
    virtual_seconds: float
    faults: list[Fault]
    violation: str | None = None
    invariant: str | None = None
    violated_at: float | None = None
    """Virtual time of the violation."""
    planned_end: float = 0.0
    """Virtual time the run would have ended at (faults, then the heal)."""
    tail: list[str] = field(default_factory=list)
    requests: int = 0
    unsafe: bool = False
    """Run with the deliberately unsafe ``M(p)`` rule (``--unsafe-test-build``)."""
    chunks_applied: int = 0
    l0_deleted: int = 0

    @property
    def ok(self) -> bool:
        return self.violation is None


def default_faults(seed: int, seconds: float = DEFAULT_SECONDS) -> list[Fault]:
    """The seed's fault schedule."""
    scenario = scenario_of(seed)
    policy = LeasePolicy()
    return draw_schedule(
        _stream(seed, "faults"),
        list(scenario.nodes),
        list(scenario.spare),
        seconds,
        policy.ttl_seconds,
        root=ROOT,
    )


def heal_seconds(settings: ClusterSettings) -> float:
    """How long after the faults stop every partition must be led again:
    a TTL (a dead node's lease runs out) and two rounds, plus the early
    look's delay and one leading step."""
    return settings.policy.ttl_seconds + 2 * settings.round_seconds + 3.0


DATA_HEAL_SECONDS = 60.0
"""How long after the partitions are led again ``M`` must have passed the
epoch the faults stopped at: two epoch ticks applied in every partition
(one by an idle partition's ``advance_epoch``), a reconciliation, a
report and a collector round, with room for each to wait its turn."""


def run_seed(
    seed: int,
    *,
    seconds: float = DEFAULT_SECONDS,
    faults: list[Fault] | None = None,
    unsafe: bool = False,
    stop_at: float | None = None,
) -> SeedResult:
    """Run ``seed`` (with ``faults`` instead of its own schedule, when
    given: shrinking) and check every invariant; ``unsafe`` composes the
    nodes with the deliberately unsafe ``M(p)`` rule the invariants must
    catch. ``stop_at`` ends the run early (the checks made after the heal
    phase are then not made): a shrinking run need not go on long past
    the violation it looks for."""
    scenario = scenario_of(seed)
    schedule = default_faults(seed, seconds) if faults is None else faults
    sched = Scheduler(_stream(seed, "scheduler"))
    trace = Trace(lambda: sched.now)
    network = Network(sched, _stream(seed, "store"), schedule, list(scenario.gateways), trace.add)
    rule = unsafe_max_applied_rule if unsafe else safe_epoch_rule
    settings = ClusterSettings(
        scenario.partitions,
        producers=scenario.producers,
        collectors=scenario.collectors,
        safe_epoch_rule=rule,
    )
    world = World(sched, network, _stream(seed, "nodes"), settings, trace.add)
    sched.after_each = world.check_safety
    starts = _stream(seed, "starts")
    for name in scenario.nodes:
        sched.at(starts.uniform(0.0, 2.0), partial(_start, world, name))
    sched.at(0.0, world.start_data_path)
    for fault in schedule:
        trace.add(f"fault scheduled: {fault.describe()}")
        sched.at(fault.at, partial(_apply, world, fault))
    healed = seconds + heal_seconds(settings)
    end = healed + DATA_HEAL_SECONDS
    sched.at(seconds, world.data_faults_end)
    sched.at(healed, world.check_liveness)
    result = SeedResult(seed, "", 0, end, schedule, unsafe=unsafe, planned_end=end)
    try:
        with _logs_into(trace):
            sched.run_until(end if stop_at is None else min(end, stop_at))
            if stop_at is None or stop_at >= end:
                world.check_data_liveness()
    except Violation as violation:
        result.violation = str(violation)
        result.invariant = violation.invariant
        result.violated_at = sched.now
        trace.add(f"VIOLATION {violation}")
    finally:
        for node in world.processes():
            if node.process.alive:
                sched.kill(node.process)
    result.trace_hash = trace.digest
    result.events = trace.events
    result.tail = list(trace.tail)
    result.virtual_seconds = sched.now
    result.requests = network.requests
    result.chunks_applied = world.data.chunks
    result.l0_deleted = world.data.deleted_l0
    return result


def _start(world: World, node: str) -> None:
    world.start_node(node)


def _apply(world: World, fault: Fault) -> None:
    if fault.kind == "crash":
        world.crash(fault.target, fault.seconds)
    elif fault.kind == "pause":
        world.pause(fault.target, fault.seconds)
    elif fault.kind == "join":
        if fault.target not in world.nodes:
            world.start_node(fault.target)
    elif fault.kind == "leave":
        world.leave(fault.target)
    elif fault.kind == "restart":
        world.restart(fault.target, fault.seconds)
    elif fault.kind == "foreign_owner":
        world.rewrite_owner(fault.pick)
    elif fault.kind == "duplicate":
        world.duplicate(fault.target, fault.seconds)
    elif fault.kind == "operator_pause":
        world.operator_pause(fault.seconds)
    elif fault.kind == "topic_race":
        world.topic_race(fault.target, fault.pick, fault.count)
    elif fault.kind == "compaction":
        world.operator_compaction()
    elif fault.kind == "producer_stall":
        world.stall_producer(fault.seconds)
    elif fault.kind == "hung_loop":
        loop = ROUNDS_LOOP if fault.pick < 0.5 else OWNERSHIP_LOOP
        world.hang(fault.target, loop, fail=fault.pick % 0.5 >= 0.25)


def shrink(result: SeedResult, *, seconds: float = DEFAULT_SECONDS) -> list[Fault]:
    """The fewest faults with which ``result``'s seed still breaks the same
    invariant: first every fault scheduled after the violation is
    dropped, then chunks of the rest, halves first, then smaller ones
    down to single faults (delta debugging), within ``SHRINK_RUNS``
    re-runs. A re-run stops ``SHRINK_MARGIN_SECONDS`` after the original
    violation: one that breaks the invariant only later is counted as
    not breaking it (shrinking stays a search, and a fast one)."""
    faults = list(result.faults)
    stop_at = None
    if result.violated_at is not None and result.violated_at < result.planned_end:
        stop_at = result.violated_at + SHRINK_MARGIN_SECONDS
    runs = 0

    def still_fails(candidate: list[Fault]) -> bool:
        nonlocal runs
        runs += 1
        again = run_seed(
            result.seed, seconds=seconds, faults=candidate, unsafe=result.unsafe, stop_at=stop_at
        )
        return again.invariant == result.invariant

    if result.violated_at is not None:
        before = [f for f in faults if f.at <= result.violated_at]
        if len(before) < len(faults) and still_fails(before):
            faults = before
    size = max(1, len(faults) // 2)
    while runs < SHRINK_RUNS:
        dropped = False
        start = 0
        while start < len(faults) and runs < SHRINK_RUNS:
            fewer = faults[:start] + faults[start + size :]
            if still_fails(fewer):
                faults, dropped = fewer, True
            else:
                start += size
        if size == 1 and not dropped:
            break
        size = max(1, size // 2) if not dropped else size
    return faults


def report_lines(result: SeedResult, shrunk: list[Fault] | None = None) -> list[str]:
    """A failing seed as a person reads it: the invariant, the replay
    command, the last trace events and the shrunk fault schedule."""
    if result.ok:
        return [f"seed {result.seed}: OK (trace {result.trace_hash})"]
    lines = [
        f"seed {result.seed}: VIOLATION {result.violation}",
        f"  replay: epochgc simulate --seed {result.seed}"
        + (" --unsafe-test-build" if result.unsafe else ""),
        f"  trace {result.trace_hash}; last {len(result.tail)} events:",
        *(f"    {line}" for line in result.tail),
    ]
    if shrunk is not None:
        lines.append(f"  shrunk fault schedule ({len(shrunk)} of {len(result.faults)} faults):")
        lines += [f"    {fault.describe()}" for fault in shrunk] or ["    (none)"]
    return lines


def _run_in_worker(job: tuple[int, float, bool]) -> SeedResult:
    seed, seconds, unsafe = job
    return run_seed(seed, seconds=seconds, unsafe=unsafe)


def run_seeds(
    seeds: Iterable[int],
    *,
    seconds: float = DEFAULT_SECONDS,
    workers: int | None = None,
    unsafe: bool = False,
) -> Iterator[SeedResult]:
    """Every seed, on ``workers`` processes (default: every core), in
    seed order. Workers run with ``PYTHONHASHSEED=0`` so a seed's
    trace hash is the same in every run."""
    jobs = [(seed, seconds, unsafe) for seed in seeds]
    count = workers or os.cpu_count() or 1
    os.environ["PYTHONHASHSEED"] = "0"
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(count, mp_context=context)
    try:
        futures = [pool.submit(_run_in_worker, job) for job in jobs]
        for future in futures:
            yield future.result()
    finally:
        # A caller that stops early (the first violation is enough) does
        # not wait for the seeds nobody will read.
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class Progress:
    """A periodic progress line for many seeds: rate and ETA."""

    total: int
    every_seconds: float = 10.0
    started: float = field(default_factory=time.monotonic)
    _last: float = 0.0

    def line(self, done: int, violations: int, *, force: bool = False) -> str | None:
        now = time.monotonic()
        if not force and now - self._last < self.every_seconds:
            return None
        self._last = now
        rate = done / max(now - self.started, 1e-9) * 3600
        left = (self.total - done) / max(rate / 3600, 1e-9)
        return (
            f"simulate: {done}/{self.total} seeds, {violations} violations, "
            f"{rate:,.0f} seeds/hour, ETA {left:,.0f}s"
        )

    def seeds_per_hour(self, done: int) -> float:
        return done / max(time.monotonic() - self.started, 1e-9) * 3600
