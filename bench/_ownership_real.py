"""The real-S3 half of ``bench_ownership``: the embedded S3 (moto server,
over HTTP, a process of its own), 2,000 partitions, 20 reconciler nodes.

* epochgc: every node is an ``epochgc reconciler`` process of its own (the
  product's command, ``bench/_node_procs.py``), all started together on
  one configuration file written for the run (the product's lease and
  round timings; idle partitions; no epoch ticker). What they own and lead
  is read from the bucket by the bench's own client
  (``bench/_store_watch.py``): the ownership records and the partition
  logs, never the nodes' own word. Request counts are each node's own
  (its ``/metrics``: every request of its client, exact). The busiest node
  (most records) is killed with a real ``SIGKILL``, in three scenarios,
  each on a fresh cluster in a bucket of its own and repeated
  (``--real-runs``):

  - ``plain``: once every partition is owned and led;
  - ``leading``: as soon as every partition is owned, while the survivors
    are still opening the partitions they own (a node's ownership round
    must not wait behind its leaders);
  - ``busy``: as ``plain``, with a neighbour process spinning on a core
    (pinned to core 0 where the machine allows) from just before the kill
    until the failover is over.

  The failover is the time from the kill until every partition the killed
  node held is owned by a survivor: the newest ``updated_at`` of the
  take-over records (the writer's clock is this machine's clock), checked
  against the bench's polls of the records, which give the "seen by"
  upper bound. Then until each is led again (its log's newest entry at
  the record's term: the new leader's ``term_start``), by polls. The
  partition logs of the killed node's partitions are checked afterwards
  for two owners counting.
* per-partition leases (the design before): the real ``LeaseManager``
  (still the singleton roles' lease code) driven the way the old
  ``ReconcilerNode`` drove it, 20 nodes as threads of this process: each
  round ``try_acquire`` of every partition lease the node does not hold,
  in sequence (one GET each, a PUT to take one), one heartbeat thread
  renewing every held lease (one PUT each). The partitions are not led (no
  partition-log I/O), so its figures are a lower bound of that design's
  cost. Its phases are capped in time: it cannot finish a round of 20
  nodes x 2,000 GETs on this machine in the time the new design needs for
  everything; a figure not reached within its cap says so. Every node has
  its own boto3 client with its own request counter (exact).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench._failover import RealTime, kill_busiest
from bench._harness import balanced
from bench._node_procs import NodeConfig, NodeProcess, NodeProcesses
from bench._store_watch import StoreWatch
from epochgc.errors import EpochGCError
from epochgc.leases.holder_codec import decode_node_lease, decode_owner
from epochgc.leases.role_leases import LeaseManager
from epochgc.leases.timing import LeasePolicy
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import PartitionId, node_lease_key, owner_key
from epochgc.storage.object_store import get_or_none
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.layout import ensure_layout
from epochgc.watermarks.partition.replica import PartitionReplica

ROOT = "epochgc"
log = logging.getLogger("epochgc.bench")

SCENARIOS: dict[str, str] = {
    "plain": "killed once every partition is owned and led",
    "leading": "killed as soon as every partition is owned, survivors still opening theirs",
    "busy": "killed once owned and led, a neighbour spinning on a core during the failover",
}
"""The failover scenarios, in the order they run."""


@dataclass
class FailoverRun:
    """One fresh cluster: its start, then the kill of its busiest node."""

    scenario: str
    run: int
    victim: str = ""
    partitions: int = 0
    """Partitions the killed node owned."""
    led_at_kill: int = 0
    """Partitions of the cluster led when the node was killed."""
    seconds: float = math.inf
    """Kill until every one of its partitions is owned by a survivor: the
    newest take-over record's own time."""
    seen_seconds: float = math.inf
    """The same, as the bench's polls first saw it (an upper bound)."""
    acknowledged_seconds: float = math.inf
    """The same, by the survivors' log lines that say a take-over's write
    was answered (a cross-check: the write landed before)."""
    led_seconds: float = math.inf
    """Kill until each is led again, as the polls saw it."""
    seconds_to_all_owned: float = math.inf
    seconds_to_all_led: float = math.inf
    renewed_before_kill: float = math.nan
    """How long before the kill the killed node last renewed its lease (its
    lease's ``renewed_at``): the others count the TTL from when they first
    saw that renewal, so this much of the TTL had passed at the kill."""
    double_owner_violations: int = -1
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.scenario} {self.run}"

    def past_ttl(self, ttl_seconds: float) -> float:
        """Seconds from the end of the killed node's last TTL (its last
        renewal plus the TTL, the earliest any survivor may judge it dead)
        until its partitions were owned again: how late the survivors
        first saw that renewal (they list the nodes once a round, so up to
        a round) plus the takeover round's own requests."""
        return self.seconds - (ttl_seconds - self.renewed_before_kill)


@dataclass
class RealResult:
    """The figures of one design on the embedded S3."""

    design: str
    seconds_to_all_owned: float = math.inf
    seconds_to_all_led: float = math.inf
    """Until every partition is led (replica opened, ``term_start``
    written): the reconciler's work on top of ownership."""
    seconds_to_all_registered: float = math.inf
    """Until every node's lease object exists (processes started)."""
    loads: list[int] | None = None
    """Partitions per node once balanced; ``None``: not measured (only
    the "leading" scenario ran, whose kill comes before that)."""
    requests_per_node_second: float = 0.0
    busiest_node_requests_per_second: float = 0.0
    busiest_node_without_gets_per_second: float = 0.0
    """The busiest node's requests other than GETs (liveness, listings,
    reports): what the issue 16 budget covers. A settled epochgc node's
    GETs are its periodic read of its records by key."""
    failover_seconds: float = math.inf
    """The slowest failover of all runs."""
    failover_led_seconds: float = math.inf
    """The slowest until led again, of the runs killed once all was led."""
    victim_partitions: int = 0
    steady_by_operation: dict[str, float] = field(default_factory=dict)
    """Requests per node per second in steady state, by S3 operation."""
    double_owner_violations: int = -1
    """-1: not checked."""
    failovers: list[FailoverRun] = field(default_factory=list)
    observer_requests_per_second: float = 0.0
    """The bench's own reads of the bucket, over the epochgc runs."""
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


# --- epochgc: reconciler nodes as processes ------------------------------------------


class _PolledTime(RealTime):
    """Wall time for the failover: each tick sleeps, reads the bucket, and
    is the time the read ended, so a milestone's time is an upper bound
    (the state read was true by then)."""

    def __init__(self, poll_seconds: float, read: Callable[[], None]) -> None:
        super().__init__(poll_seconds)
        self._read = read

    def tick(self, previous: float) -> float:
        time.sleep(self.poll_seconds)
        self._read()
        return time.monotonic()


class _Progress:
    """A line every few seconds while a phase waits."""

    def __init__(self, label: str, every: float = 5.0) -> None:
        self.label, self.every = label, every
        self.started = self.last = time.monotonic()

    def maybe(self, text: Callable[[], str]) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            log.info("%s +%.0fs: %s", self.label, now - self.started, text())


class NodeDiedError(RuntimeError):
    """A node process exited without being killed by the bench."""


def _wait(
    procs: NodeProcesses, step: Callable[[], bool], poll: float, limit_seconds: float
) -> bool:
    """Call ``step`` every ``poll`` seconds until it says done (``True``)
    or ``limit_seconds`` pass (``False``); a node that exits meanwhile
    ends the run."""
    deadline = time.monotonic() + limit_seconds
    while time.monotonic() < deadline:
        time.sleep(poll)
        dead = procs.died_on_their_own()
        if dead:
            tail = " | ".join(dead[0].last_lines(3))
            raise NodeDiedError(f"node {dead[0].node_id} exited on its own: {tail}")
        if step():
            return True
    return False


class _ClusterRun:
    """One fresh cluster in a bucket of its own: start, (balance, steady),
    kill the busiest node, time the failover, stop, check the logs."""

    def __init__(
        self,
        s3: EmbeddedS3,
        args: argparse.Namespace,
        workroot: Path,
        run: FailoverRun,
        result: RealResult | None,
    ) -> None:
        self.a = args
        self.run = run
        self.result = result
        """Where the start, balance and steady figures go (the first run)."""
        bucket = f"bench-own-{run.scenario}-{run.run}"
        s3.create_bucket(bucket)
        self.store, self.stats = _client(s3, bucket)
        ensure_layout(self.store, ROOT)
        self.pids = frozenset(_topics(self.store, args.real_partitions, args.real_topics))
        self.names = [f"node-{i:02d}" for i in range(args.real_nodes)]
        self.workdir = workroot / bucket
        self.workdir.mkdir(parents=True)
        settings = s3.client_settings()
        self.config = NodeConfig(
            endpoint_url=s3.endpoint_url,
            access_key_id=settings.access_key_id or "",
            secret_access_key=settings.secret_access_key or "",
            bucket=bucket,
            root=ROOT,
            ttl_seconds=args.real_ttl,
            renew_seconds=args.real_renew,
            skew_margin_seconds=args.real_ttl / 10,
            ownership_round_seconds=args.real_round,
            max_moves=args.real_max_moves,
            reconciler_round_seconds=args.real_round,
            report_seconds=5.0,
        ).write(self.workdir / "epochgc.toml")
        self.watch = StoreWatch(self.store, self.stats, ROOT, self.pids)
        self.victims: set[PartitionId] = set()
        """The partitions the killed node owned."""
        a = args
        self.cap = (
            2 * a.real_start_cap
            + a.real_lead_cap
            + a.real_steady
            + a.real_ttl
            + a.real_failover_cap
        ) + 120

    def go(self) -> None:
        try:
            with NodeProcesses(self.config, self.workdir, duration_seconds=self.cap) as procs:
                self._run(procs)
        finally:
            self.watch.close()
        if self.run.victim:
            try:
                self.run.double_owner_violations = _check_logs(self.store, self.victims)
            except EpochGCError as err:
                self.run.notes.append(f"partition logs not checked: {err}")

    def _run(self, procs: NodeProcesses) -> None:
        a, run, watch = self.a, self.run, self.watch
        want = self.pids
        launched_wall, launched = time.time(), time.monotonic()
        procs.start(self.names)
        registered = math.inf
        progress = _Progress(f"{run.label}: start")

        def all_owned() -> bool:
            nonlocal registered
            watch.poll_records()
            if math.isinf(registered) and set(self.names) <= watch.nodes:
                registered = time.monotonic() - launched
            owned = watch.owned(self.names)
            progress.maybe(
                lambda: (
                    f"nodes registered {len(watch.nodes)}/{len(self.names)}, "
                    f"owned {len(owned)}/{len(want)} (a read takes {watch.last_read[0]:.1f}s)"
                )
            )
            return owned == want

        if not _wait(procs, all_owned, a.real_poll, a.real_start_cap):
            run.notes.append(f"not every partition owned within {a.real_start_cap:g}s")
            return
        firsts = [watch.first_owned_at(p) for p in want]
        if all(t is not None for t in firsts):
            run.seconds_to_all_owned = max(t.timestamp() for t in firsts if t) - launched_wall
        log.info(
            "%s: every partition owned %.1fs after launch (nodes registered by %.1fs)",
            run.label,
            run.seconds_to_all_owned,
            registered,
        )
        if run.scenario != "leading":
            progress = _Progress(f"{run.label}: leading")

            def all_led() -> bool:
                watch.poll_records()
                watch.poll_logs()
                led = watch.led(self.names)
                progress.maybe(lambda: f"led {len(led)}/{len(want)}")
                return led == want

            if not _wait(procs, all_led, a.real_poll, a.real_lead_cap):
                run.notes.append(f"not every partition led within {a.real_lead_cap:g}s")
                return
            run.seconds_to_all_led = time.monotonic() - launched
            log.info("%s: every partition led by %.1fs", run.label, run.seconds_to_all_led)
        if self.result is not None:
            self.result.seconds_to_all_registered = registered
            self._balance_and_steady(procs)
        self._failover(procs)

    def _balance_and_steady(self, procs: NodeProcesses) -> None:
        a, watch, result = self.a, self.watch, self.result
        assert result is not None
        progress = _Progress(f"{self.run.label}: balance")

        def settled() -> bool:
            watch.poll_records()
            loads = list(watch.loads(self.names).values())
            progress.maybe(lambda: f"max/min {max(loads)}/{min(loads)}")
            return sum(loads) == len(self.pids) and balanced(loads, len(self.pids))

        if not _wait(procs, settled, a.real_poll, a.real_start_cap):
            result.notes.append(f"not balanced within {a.real_start_cap:g}s")
        time.sleep(2 * a.real_round)
        log.info("%s: steady state for %gs (no reads by the bench)", self.run.label, a.real_steady)
        before = procs.requests()
        started = time.monotonic()
        time.sleep(a.real_steady)
        after = procs.requests()
        seconds = time.monotonic() - started
        nodes = sorted(after)
        _steady_rates(result, [before[n] for n in nodes], [after[n] for n in nodes], seconds)
        watch.poll_records()
        loads = list(watch.loads(self.names).values())
        result.loads = loads
        log.info(
            "%s: steady %.2f requests/node/s (busiest node %.2f; %s), loads max/min %d/%d",
            self.run.label,
            result.requests_per_node_second,
            result.busiest_node_requests_per_second,
            ", ".join(f"{op} {r:.2f}" for op, r in result.steady_by_operation.items() if r),
            max(loads),
            min(loads),
        )

    def _failover(self, procs: NodeProcesses) -> None:
        a, run, watch = self.a, self.run, self.watch
        spinner = None
        if run.scenario == "busy":
            spinner = procs.busy_neighbour()
            time.sleep(1.0)
        watch.poll_records()  # who owns the most, now
        survivors: set[str] = set()
        victims: set[PartitionId] = set()
        quiet_until = math.inf

        def read() -> None:
            if time.monotonic() < quiet_until:
                return  # nothing can be taken over yet: spare the server
            watch.poll_records(fetch=victims.__contains__)
            if victims <= watch.owned(survivors):  # not before: the takes go first
                led = watch.led(survivors)
                watch.probe_logs(p for p in victims if p not in led)

        failover = kill_busiest(
            procs.live(),
            lambda n: watch.owned_by(n.node_id),
            lambda n: _sigkill(procs, n),
            _PolledTime(a.real_poll_failover, read),
        )
        victim: NodeProcess = failover.victim
        victims = failover.partitions
        survivors = {n.node_id for n in failover.others}
        terms = {p: watch.records[p].term for p in victims}
        self.victims = set(victims)
        run.victim, run.partitions = victim.node_id, len(victims)
        lease = get_or_none(self.store, node_lease_key(ROOT, victim.node_id))
        if lease is not None and victim.killed_at is not None:
            renewed = decode_node_lease(lease.body, "node lease").renewed_at
            run.renewed_before_kill = victim.killed_at - renewed.timestamp()
        watch.poll_logs()  # log tails at the kill
        run.led_at_kill = len(watch.led(self.names))
        log.info(
            "%s: killed %s (pid %d, %d partitions, lease renewed %.1fs before; %d/%d partitions "
            "led at the kill)",
            run.label,
            victim.node_id,
            victim.pid,
            len(victims),
            run.renewed_before_kill,
            run.led_at_kill,
            len(self.pids),
        )
        quiet_until = failover.killed_at + a.real_ttl / 2
        progress = _Progress(f"{run.label}: failover", every=2.0)
        seconds = failover.time(
            {
                "owned": lambda: victims <= watch.owned(survivors),
                "led": lambda: victims <= watch.led(survivors),
            },
            limit_seconds=a.real_ttl + a.real_failover_cap,
            on_poll=lambda: progress.maybe(
                lambda: (
                    f"owned by survivors {len(victims & watch.owned(survivors))}/"
                    f"{len(victims)}, led {len(victims & watch.led(survivors))}/{len(victims)} "
                    f"(a read takes {watch.last_read[0]:.1f}s)"
                )
            ),
        )
        if spinner is not None:
            procs.stop_extra()
        run.seen_seconds, run.led_seconds = seconds["owned"], seconds["led"]
        taken = [watch.taken_over_at(p, victim.node_id, terms[p]) for p in victims]
        if victim.killed_at is not None and all(t is not None for t in taken):
            newest = max(t.doc.updated_at.timestamp() for t in taken if t is not None)
            run.seconds = newest - victim.killed_at
        acked = _acknowledged(failover.others, victim.node_id)
        if victim.killed_at is not None and {str(p) for p in victims} <= set(acked):
            run.acknowledged_seconds = max(acked[str(p)] for p in victims) - victim.killed_at
        dead = procs.died_on_their_own()
        if dead:
            run.notes.append(f"nodes exited on their own: {', '.join(n.node_id for n in dead)}")


_TOOK_OVER = re.compile(
    r"^(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(?P<ms>\d{3}) .*: took over "
    r"(?P<pid>\S+) from (?P<node>\S+) at term \d+$"
)


def _acknowledged(nodes: list[NodeProcess], victim: str) -> dict[str, float]:
    """When each partition taken over from ``victim`` was logged as taken
    (wall time; the line follows the write's answer), from the nodes' logs.
    Keys are ``str(PartitionId)``; the first line per partition counts."""
    out: dict[str, float] = {}
    for node in nodes:
        try:
            text = node.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            found = _TOOK_OVER.match(line)
            if found is None or found.group("node") != victim:
                continue
            at = time.mktime(time.strptime(found.group("date"), "%Y-%m-%d %H:%M:%S"))
            at += int(found.group("ms")) / 1000
            out[found.group("pid")] = min(at, out.get(found.group("pid"), math.inf))
    return out


def _sigkill(procs: NodeProcesses, node: NodeProcess) -> None:
    procs.kill(node)


def run_node_leases(s3: EmbeddedS3, args: argparse.Namespace, policy: LeasePolicy) -> RealResult:
    """Every scenario ``args.real_runs`` times, each on a fresh cluster;
    the first run also measures balance and steady-state requests."""
    del policy  # the nodes read theirs from the configuration file
    result = RealResult("node leases (epochgc)")
    workroot = Path(tempfile.mkdtemp(prefix="bench-ownership-"))
    keep, measured = args.real_keep_logs, False
    observer_requests, observer_seconds = 0, 0.0
    try:
        for scenario in args.real_scenarios.split(","):
            for index in range(1, args.real_runs + 1):
                run = FailoverRun(scenario, index)
                # The first run that waits until every partition is led also
                # measures balance and the steady state, before its kill.
                full = scenario != "leading" and not measured
                measured = measured or full
                started = time.monotonic()
                cluster = _ClusterRun(s3, args, workroot, run, result if full else None)
                log.info("%s: %s", run.label, SCENARIOS[scenario])
                try:
                    cluster.go()
                except (NodeDiedError, OSError) as err:
                    run.notes.append(str(err))
                    keep = True
                observer_requests += cluster.stats.total()
                observer_seconds += time.monotonic() - started
                if run.notes or not run.seconds <= args.real_ttl + args.real_round:
                    keep = True  # a failing run's node logs say why
                if full:
                    result.seconds_to_all_owned = run.seconds_to_all_owned
                    result.seconds_to_all_led = run.seconds_to_all_led
                result.failovers.append(run)
                log.info(
                    "%s: failover %s (%.1fs past the killed lease's TTL; acknowledged %s, "
                    "seen by %s), led again %s; %d logs with two owners%s",
                    run.label,
                    _secs(run.seconds),
                    run.past_ttl(args.real_ttl),
                    _secs(run.acknowledged_seconds),
                    _secs(run.seen_seconds),
                    _secs(run.led_seconds),
                    run.double_owner_violations,
                    "".join(f"; {n}" for n in run.notes),
                )
    finally:
        if keep:
            log.warning("node logs kept in %s", workroot)
        else:
            shutil.rmtree(workroot, ignore_errors=True)
    runs = result.failovers
    result.failover_seconds = max((r.seconds for r in runs), default=math.inf)
    # Led again, where the survivors had nothing else to open: in the
    # "leading" scenario they are still opening their own partitions.
    result.failover_led_seconds = max(
        (r.led_seconds for r in runs if r.scenario != "leading"), default=math.inf
    )
    result.victim_partitions = max((r.partitions for r in runs), default=0)
    checked = [r.double_owner_violations for r in runs]
    result.double_owner_violations = -1 if -1 in checked else sum(checked)
    result.observer_requests_per_second = observer_requests / max(observer_seconds, 1e-9)
    return result


def _secs(value: float) -> str:
    return "never" if math.isinf(value) else f"{value:.1f}s"


def _kill(node: _OldNode) -> None:
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


def _steady(result: RealResult, stats: list[RequestStats], seconds: float) -> None:
    before = [s.by_operation() for s in stats]
    time.sleep(seconds)
    after = [s.by_operation() for s in stats]
    _steady_rates(result, before, after, seconds)


def _steady_rates(
    result: RealResult,
    before: list[dict[str, int]],
    after: list[dict[str, int]],
    seconds: float,
) -> None:
    """Requests per node per second between two counts of every node's
    requests by operation: the mean, the busiest node, by operation."""
    counts = [sum(a.values()) - sum(b.values()) for a, b in zip(after, before, strict=True)]
    result.requests_per_node_second = sum(counts) / len(counts) / seconds
    result.busiest_node_requests_per_second = max(counts) / seconds
    result.busiest_node_without_gets_per_second = (
        max(
            sum(v for op, v in a.items() if op != "GetObject")
            - sum(v for op, v in b.items() if op != "GetObject")
            for a, b in zip(after, before, strict=True)
        )
        / seconds
    )
    ops = {op for a in after for op in a}
    result.steady_by_operation = {
        op: sum(a.get(op, 0) - b.get(op, 0) for a, b in zip(after, before, strict=True))
        / len(after)
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
    result.loads = [len(n.led()) for n in nodes]
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
