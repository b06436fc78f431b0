"""``epochgc demo``: the whole lifecycle in one process, then a check.

On the embedded S3 it creates two topics, runs producers, two reconciler
nodes and the GC daemon for ``duration`` seconds while printing a live
table (cluster epoch, ``M``, L0 objects and bytes outstanding, deleted so
far, reconcile lag), then quiesces (producers stop, reconcilers catch up,
idle partitions lift ``M`` past every written epoch, the daemon deletes)
and verifies:

1. every acknowledged record reads back, at its offset, byte for byte;
2. no L0 object with epoch ``<= M`` is left, for the ``M`` of the daemon's
   last completed round.

A composition root like ``cli``: it wires the other packages together and
holds no logic of theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from epochgc.config import Config
from epochgc.gc.daemon.scheduler import GcDaemon
from epochgc.ingest.producer import Producer, acknowledged_into
from epochgc.ingest.producer_samples import producer_sample
from epochgc.metrics.instruments import CollectorRegistry, ProducerMetrics
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.reconciler.node import ReconcilerNode
from epochgc.reconciler.process_health import NodeMetrics
from epochgc.reconciler.reader import PartitionReader, check_read_back
from epochgc.storage.keys import l0_prefix, parse_l0_key
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.epoch import EpochCache
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.safe_epoch.reports import read_reports
from epochgc.wiring.reconciler_process import build_node
from epochgc.wiring.settings import daemon_settings_of
from epochgc.wiring.store import StoreHandle

log = logging.getLogger(__name__)

TOPICS = {"orders": 4, "clicks": 4}
PRODUCERS = 8
RECORDS_PER_CALL = 10
NODES = 2


@dataclass
class DemoResult:
    """What the run did and what the checks found."""

    records_acked: int = 0
    produce_failures: int = 0
    records_verified: int = 0
    deleted: int = 0
    safe_epoch: int | None = None
    cluster_epoch: int = 0
    l0_left: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    """Where the time went: ``start``, ``produce``, ``quiesce``, ``verify``."""

    @property
    def ok(self) -> bool:
        return not self.problems and self.records_acked > 0 and self.deleted > 0


@dataclass(frozen=True)
class Snapshot:
    """One row of the live table."""

    elapsed: float
    phase: str
    cluster_epoch: int
    safe_epoch: int | None
    l0_objects: int
    l0_bytes: int
    deleted: int
    acked: int
    reconcile_lag: int


HEADER = (
    f"{'time':>6} {'phase':9} {'epoch':>6} {'M':>6} {'L0 objs':>8} {'L0 bytes':>10} "
    f"{'deleted':>8} {'acked':>8} {'lag':>6}"
)


def format_row(s: Snapshot) -> str:
    """One live-table line (fixed width, so it reads well in a log too)."""
    m = "-" if s.safe_epoch is None else str(s.safe_epoch)
    return (
        f"{s.elapsed:>5.0f}s {s.phase:9} {s.cluster_epoch:>6} {m:>6} {s.l0_objects:>8} "
        f"{s.l0_bytes:>10} {s.deleted:>8} {s.acked:>8} {s.reconcile_lag:>6}"
    )


class _Workload:
    """Producers writing numbered records to random partitions, remembering
    every acknowledged (offset, record)."""

    def __init__(self, producer: Producer, seed: int) -> None:
        self._producer = producer
        self._rng = random.Random(seed)
        self.acked: dict[tuple[str, int], dict[int, bytes]] = {}
        self.failures = 0
        self.stop = asyncio.Event()

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    async def run(self, worker: int) -> None:
        sent = 0
        while not self.stop.is_set():
            topic = self._rng.choice(sorted(TOPICS))
            partition = self._rng.randrange(TOPICS[topic])
            records = [
                f"{topic}/{partition} producer-{worker} record-{sent + i}".encode()
                for i in range(RECORDS_PER_CALL)
            ]
            sent += len(records)
            try:
                offsets = await self._producer.produce(topic, partition, records)
            except Exception as err:
                self.failures += 1
                log.warning("produce to %s/%d failed (not acknowledged): %s", topic, partition, err)
                continue
            rows = self.acked.setdefault((topic, partition), {})
            rows.update(zip(offsets, records, strict=True))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), 0.1)


class _Cluster:
    """The reconciler nodes and the GC daemon of the demo, started and
    stopped together."""

    def __init__(self, config: Config, handle: StoreHandle, directory: LeaderDirectory) -> None:
        self.registry = CollectorRegistry()
        node_metrics = NodeMetrics(self.registry)
        self.nodes: list[tuple[ReconcilerNode, NodeOwnership]] = [
            build_node(config, handle.store, f"demo-node-{i}", directory, metrics=node_metrics)
            for i in range(1, NODES + 1)
        ]
        self.daemon = GcDaemon(
            handle.store,
            handle.stats,
            config.layout.root,
            daemon_settings_of(config, node_id="demo-gc"),
            registry=self.registry,
            events=handle.events,
        )
        self._round_interval = config.reconciler.round_interval_seconds
        self._stop_nodes = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        for node, ownership in self.nodes:
            ownership.start()
            self._tasks.append(
                asyncio.create_task(
                    node.run(self._stop_nodes, round_interval_seconds=self._round_interval)
                )
            )
        self.daemon.start()

    async def stop(self) -> None:
        await asyncio.to_thread(self.daemon.stop)
        self._stop_nodes.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for _node, ownership in self.nodes:
            ownership.stop(release=True)  # idempotent: node.run's stop released already


async def _create_topics(controller: Controller) -> dict[str, int]:
    view = await asyncio.to_thread(controller.snapshot)
    for name, partitions in TOPICS.items():
        if name not in view.topics:
            await asyncio.to_thread(controller.create_topic, name, partitions)
    view = await asyncio.to_thread(controller.snapshot)
    return {name: view.topics[name].revision for name in TOPICS}


async def run_demo(
    config: Config,
    handle: StoreHandle,
    *,
    duration_seconds: float = 60.0,
    refresh_seconds: float = 2.0,
    quiesce_timeout_seconds: float = 90.0,
    seed: int = 1,
    emit: Callable[[str], None] = print,
) -> DemoResult:
    """Run the demo (see the module docstring) and return its result."""
    began = time.monotonic()
    store, root = handle.store, config.layout.root
    controller = Controller(store, root)
    revisions = await _create_topics(controller)
    directory = LeaderDirectory()
    cluster = _Cluster(config, handle, directory)
    cluster.start()
    emit(
        f"epochgc demo: {sum(TOPICS.values())} partitions in {len(TOPICS)} topics, "
        f"{PRODUCERS} producers, {NODES} reconciler nodes, 1 GC daemon, {duration_seconds:.0f}s "
        f"on {handle.endpoint}; metrics at {cluster.daemon.metrics_url or 'off'}/metrics"
    )
    producers: list[Producer] = []
    producer_metrics = ProducerMetrics(
        cluster.registry, lambda: producer_sample(producers[0].stats)
    )
    producer = Producer(
        store,
        root,
        directory,
        EpochCache(controller.current_epoch, ttl_seconds=config.epoch.cache_ttl_seconds),
        revisions.__getitem__,
        shards=config.layout.l0_shards,
        linger_seconds=config.producer.linger_seconds,
        max_batch_bytes=config.producer.max_batch_bytes,
        depth=config.producer.depth,
        events=acknowledged_into(producer_metrics.latency.observe),
    )
    producers.append(producer)
    workload = _Workload(producer, seed)
    result = DemoResult()
    started = time.monotonic()
    result.seconds["start"] = started - began

    async def show(phase: str) -> Snapshot:
        row = await asyncio.to_thread(
            _observe, store, root, cluster, workload, phase, time.monotonic() - started
        )
        emit(format_row(row))
        return row

    emit(HEADER)
    try:
        tasks = [asyncio.create_task(workload.run(i)) for i in range(PRODUCERS)]
        while time.monotonic() - started < duration_seconds:
            await asyncio.sleep(refresh_seconds)
            await show("produce")
        workload.stop.set()
        await asyncio.gather(*tasks)
        await producer.close()
        result.seconds["produce"] = time.monotonic() - started
        quiescing = time.monotonic()
        deadline = quiescing + quiesce_timeout_seconds
        while True:
            await asyncio.sleep(refresh_seconds / 2)
            row = await show("quiesce")
            if row.l0_objects == 0 and row.reconcile_lag == 0:
                break
            if time.monotonic() > deadline:
                result.problems.append(
                    f"did not quiesce within {quiesce_timeout_seconds:.0f}s "
                    f"({row.l0_objects} L0 objects, reconcile lag {row.reconcile_lag})"
                )
                break
    finally:
        workload.stop.set()
        await cluster.stop()
    verifying = time.monotonic()
    result.seconds["quiesce"] = verifying - started - result.seconds.get("produce", 0.0)
    await asyncio.to_thread(_verify, store, root, cluster, workload, result)
    result.seconds["verify"] = time.monotonic() - verifying
    return result


def _deleted(cluster: _Cluster) -> int:
    value = cluster.registry.get_sample_value("epochgc_collector_objects_deleted_total")
    return int(value or 0)


def _observe(
    store: ObjectStore,
    root: str,
    cluster: _Cluster,
    workload: _Workload,
    phase: str,
    elapsed: float,
) -> Snapshot:
    objects = list(store.list_objects(l0_prefix(root)))
    reports, _skipped = read_reports(store, root)
    lro: dict[tuple[str, int], int] = {}
    for report in reports:
        for entry in report.partitions:
            key = (entry.topic, entry.partition)
            lro[key] = max(lro.get(key, -1), entry.lro)
    lag = sum(
        max(0, max(rows) - lro.get(key, -1)) for key, rows in list(workload.acked.items()) if rows
    )
    daemon = cluster.daemon
    current = daemon.collector.tracker.current
    return Snapshot(
        elapsed=elapsed,
        phase=phase,
        cluster_epoch=daemon.collector.controller.current_epoch(),
        safe_epoch=current.safe_epoch if current else None,
        l0_objects=len(objects),
        l0_bytes=sum(o.size for o in objects),
        deleted=_deleted(cluster),
        acked=workload.count,
        reconcile_lag=lag,
    )


def _verify(
    store: ObjectStore,
    root: str,
    cluster: _Cluster,
    workload: _Workload,
    result: DemoResult,
) -> None:
    result.records_acked = workload.count
    result.produce_failures = workload.failures
    daemon = cluster.daemon
    result.deleted = _deleted(cluster)
    result.cluster_epoch = daemon.collector.controller.current_epoch()
    reader = PartitionReader(store, root)
    for (topic, partition), acked in sorted(workload.acked.items()):
        try:
            stored = dict(reader.read(topic, partition, 0))
        except Exception as err:
            result.problems.append(f"{topic}/{partition}: cannot read back: {err}")
            continue
        verified, problem = check_read_back(f"{topic}/{partition}", acked, stored)
        result.records_verified += verified
        if problem:
            result.problems.append(problem)
    report = daemon.last_report
    collected = report.collected if report else None
    if collected is None:
        result.problems.append("the GC daemon never completed a round")
        return
    m = collected.safe.safe_epoch
    result.safe_epoch = m
    left = [
        (parsed.epoch, o.key)
        for o in store.list_objects(l0_prefix(root))
        if (parsed := parse_l0_key(o.key, root)) is not None
    ]
    result.l0_left = len(left)
    stale = sorted(e for e, _key in left if e <= m)
    if stale:
        result.problems.append(
            f"{len(stale)} L0 objects with epoch <= M={m} were not deleted (epochs {stale[:5]})"
        )


WHY = {
    "start": "topics, nodes, daemon",
    "produce": "the --duration of workload",
    "quiesce": "until every record is reconciled and every L0 object collected",
    "verify": "reading every acknowledged record back",
}


def summary_lines(result: DemoResult) -> list[str]:
    """The closing report."""
    lines = [
        f"records acknowledged: {result.records_acked} "
        f"({result.produce_failures} produce calls failed, not acknowledged)",
        f"records read back:    {result.records_verified}",
        f"L0 objects deleted:   {result.deleted}; left: {result.l0_left} "
        f"(final M {result.safe_epoch}, cluster epoch {result.cluster_epoch})",
    ]
    if result.records_acked == 0:
        lines.append("FAILED: no record was acknowledged")
    if result.deleted == 0:
        lines.append("FAILED: the collector deleted nothing")
    if result.seconds:
        lines.append(
            "time: "
            + ", ".join(
                f"{what} {seconds:.0f}s ({WHY[what]})"
                for what, seconds in result.seconds.items()
                if what in WHY
            )
        )
    lines += [f"FAILED: {p}" for p in result.problems]
    if result.ok:
        lines.append("demo OK: every acknowledged record reads back; every L0 object <= M is gone")
    return lines
