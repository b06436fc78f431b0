"""Running a reconciler node as a process: ``epochgc reconciler``.

The composition root for the node: builds the node's ownership (its node
lease, with one heartbeat thread, and its ownership records), the node,
and, with ``[epoch] ticker``, the epoch ticker (which ticks only while this
node holds the cluster's one ``ticker`` lease), runs rounds until
SIGTERM/SIGINT or ``--duration``, then stops the ticker, steps down and
releases every ownership record and the node lease so the other nodes take
over at their next round. A kill -9 releases nothing: the others take over
after the lease TTL plus up to two ownership rounds.

A loop of the node that stops completing rounds or dies (``ReconcilerNode
.run``) ends the process with exit status 1 and one line naming the loop
and the cause; ``/healthz`` answers 503 naming it meanwhile. The exit is
immediate (``exit_process``), not a return through ``asyncio.run``: the
hung loop's thread may never end, and a normal exit waits for every
thread. A backstop thread exits the same way if the event loop itself is
blocked and the node cannot get there (``StallBackstop``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from typing import NoReturn

from epochgc.config import Config
from epochgc.errors import EpochGCError, LoopStoppedError, PartitionLedElsewhereError
from epochgc.events import EventChannel
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.role_leases import LeaseManager
from epochgc.metrics.instruments import (
    CollectorRegistry,
    TickerSample,
    register_s3_requests,
    register_ticker,
)
from epochgc.metrics.server import MetricsServer
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.ownership.owner_records import read_owner
from epochgc.reconciler.node import ReconcilerNode, ReconcilerRoundEnded
from epochgc.reconciler.process_health import NodeMetrics, StallBackstop, reconciler_health
from epochgc.runtime import Runtime
from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.safe_epoch.reports import SafeEpochRule, safe_epoch_rule
from epochgc.watermarks.ticker import EpochTicker
from epochgc.wiring.settings import default_node_id, lease_policy_of, node_settings_of

log = logging.getLogger(__name__)


def build_node(
    config: Config,
    store: ObjectStore,
    node_id: str | None,
    directory: LeaderDirectory,
    *,
    metrics: NodeMetrics | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    one_shot: bool = False,
    only_partitions: frozenset[tuple[str, int]] = frozenset(),
    safe_epoch_rule: SafeEpochRule = safe_epoch_rule,
) -> tuple[ReconcilerNode, NodeOwnership]:
    """A node and its ownership (node lease + records) from the
    configuration (not started: ``ownership.start()`` starts the lease's
    heartbeat); with ``metrics``, the node reports to them. ``now`` is the
    wall clock of the node and its lease (``epochgc verify`` skews it). A
    ``one_shot`` node (``epochgc produce``) publishes no report: it would
    outlive the command as a report of a node that never comes back, and
    serves ``only_partitions`` when given (the one it writes to).
    ``safe_epoch_rule``: see ``ReconcilerNode``; no shipped command passes
    one (only ``epochgc verify``'s workers, for the unsafe test build)."""
    node_id = node_id or config.reconciler.node_id or default_node_id()
    root = config.layout.root
    runtime = Runtime(wall=now)
    ownership = NodeOwnership(
        store,
        root,
        NodeLease(store, root, node_id, policy=lease_policy_of(config), runtime=runtime),
        max_moves_per_round=config.ownership.max_moves_per_round,
        runtime=runtime,
        relist_records_seconds=config.ownership.relist_records_seconds,
        use_store_timestamps=config.ownership.use_store_timestamps,
    )
    events = EventChannel()
    if metrics is not None:
        events.subscribe(ReconcilerRoundEnded, metrics.round_observer(node_id))
    node = ReconcilerNode(
        store,
        root,
        node_id,
        ownership,
        directory,
        settings=node_settings_of(config, one_shot=one_shot, only_partitions=only_partitions),
        now=now,
        events=events,
        safe_epoch_rule=safe_epoch_rule,
    )
    if metrics is not None:
        metrics.nodes.append(node)
    return node, ownership


async def run_reconciler(
    config: Config,
    store: ObjectStore,
    *,
    stats: RequestStats | None = None,
    node_id: str | None = None,
    duration_seconds: float | None = None,
    exit_process: Callable[[], NoReturn] | None = None,
) -> ReconcilerNode:
    """Run a node until a signal or ``duration_seconds``; return it (stats).
    Serves ``/metrics`` and ``/healthz`` on ``metrics.listen`` when set.

    Args:
        exit_process: how the process main ends the process when a loop of
            the node stopped (``epochgc reconciler``: exit status 1 at
            once). Without it (in-process callers), ``LoopStoppedError``
            is raised once the node has let go.

    Raises:
        LoopStoppedError: a loop of the node stopped (no ``exit_process``).
    """
    root = config.layout.root
    registry = CollectorRegistry()
    if stats is not None:
        register_s3_requests(registry, stats)
    node, ownership = build_node(
        config, store, node_id, LeaderDirectory(), metrics=NodeMetrics(registry)
    )
    leases = LeaseManager(store, root, node.node_id, policy=lease_policy_of(config))
    ticker = (
        EpochTicker(
            leases,
            Controller(store, root).tick,
            interval_seconds=config.epoch.interval_seconds,
            poll_seconds=config.lease.renew_interval_seconds,
        )
        if config.epoch.ticker
        else None
    )

    def ticker_sample() -> TickerSample:
        if ticker is None:
            return TickerSample(eligible=False, held=False, ticks=0, failures=0)
        return TickerSample(
            eligible=True, held=ticker.held, ticks=ticker.ticks, failures=ticker.failures
        )

    register_ticker(registry, ticker_sample)
    server = (
        MetricsServer(
            registry,
            config.metrics.listen,
            lambda: reconciler_health(node, lambda: ticker is not None and ticker.held),
        )
        if config.metrics.listen
        else None
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if duration_seconds is not None:
        loop.call_later(duration_seconds, stop.set)
    if server is not None:
        server.start()  # first: a port in use stops the node before it takes any lease
    ownership.start()
    if ticker is not None:
        leases.start()
        ticker.start()
    log.info(
        "reconciler node %s running (root %s, metrics %s)",
        node.node_id,
        root,
        server.url if server is not None else "off",
    )
    backstop = (
        StallBackstop(node, exit_process, grace_seconds=2 * config.lease.ttl_seconds + 5.0)
        if exit_process is not None
        else None
    )
    if backstop is not None:
        backstop.start()
    stopped = False
    try:
        await node.run(stop, round_interval_seconds=config.reconciler.round_interval_seconds)
    except LoopStoppedError:
        if exit_process is None:
            raise
        stopped = True
    finally:
        if backstop is not None and not stopped:
            backstop.stop()  # on a stall it watches to the end: what follows may hang too
        if ticker is not None:
            ticker.stop(release=True)
            leases.stop(release=True)
        if server is not None:
            server.stop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    if stopped and exit_process is not None:
        exit_process()  # the node has said why, in one line
    log.info(
        "reconciler node %s stopped: %d rounds, %d records reconciled, %d errors",
        node.node_id,
        node.stats.rounds,
        node.stats.records_reconciled,
        node.stats.errors,
    )
    return node


def _not_led_here(store: ObjectStore, root: str, pid: PartitionId) -> EpochGCError:
    """Why a one-shot node does not lead ``pid``, as an error that says what
    to do. The smoke test writes through a leader of its own and never takes
    a partition over from a live node (that would fence the node's writes),
    so waiting for a leader would only time out."""
    owner = read_owner(store, root, pid)
    name = f"{pid.topic}/{pid.partition}"
    if owner is not None and not owner.released:
        return PartitionLedElsewhereError(
            f"{name} is led by node {owner.node} (term {owner.term}); `epochgc produce` "
            "writes through a leader of its own and never takes a led partition: stop "
            "that node (SIGTERM hands its partitions over at once) or produce to a "
            "partition no node leads"
        )
    return PartitionLedElsewhereError(
        f"{name}: this process could not take the partition (its node lease is held by "
        "another process of the same node id, or another node should own it); try again"
    )


async def produce_and_verify(
    config: Config,
    store: ObjectStore,
    topic: str,
    partition: int,
    records: list[bytes],
    *,
    node_id: str | None = None,
    producer_store: ObjectStore | None = None,
) -> tuple[list[int], bool]:
    """Smoke test of the write path in one process: lead the one
    partition, produce ``records`` to it through a real L0
    object, reconcile, and read them back. Returns the offsets and whether
    every record read back identically. ``producer_store``: the producer
    writes (and reads the controller) with credentials of its own, as a
    producer embedded in another system does (default: ``store``)."""
    # Imported here: the write path is only needed by this command.
    from epochgc.ingest.producer import Producer  # noqa: PLC0415
    from epochgc.reconciler.reader import PartitionReader  # noqa: PLC0415
    from epochgc.watermarks.epoch import EpochCache  # noqa: PLC0415

    root = config.layout.root
    writer_store = store if producer_store is None else producer_store
    controller = Controller(writer_store, root)
    revision = (await asyncio.to_thread(controller.topic, topic)).revision
    directory = LeaderDirectory()
    node, ownership = build_node(
        config,
        store,
        node_id,
        directory,
        one_shot=True,
        only_partitions=frozenset({(topic, partition)}),
    )
    ownership.start()
    try:
        await node.run_round()
        if directory.current(topic, partition) is None:
            pid = PartitionId(topic, revision, partition)
            raise await asyncio.to_thread(_not_led_here, store, root, pid)
        producer = Producer(
            writer_store,
            root,
            directory,
            EpochCache(controller.current_epoch, ttl_seconds=config.epoch.cache_ttl_seconds),
            lambda _topic: revision,
            shards=config.layout.l0_shards,
            linger_seconds=config.producer.linger_seconds,
            max_batch_bytes=config.producer.max_batch_bytes,
            depth=config.producer.depth,
        )
        offsets = await producer.produce(topic, partition, records)
        await producer.close()
        await node.run_round()
    finally:
        await node.stop()
    pid = PartitionId(topic, revision, partition)
    rows = await asyncio.to_thread(PartitionReader(store, root).read_partition, pid, offsets[0])
    read_back = dict(rows)
    ok = all(read_back.get(o) == r for o, r in zip(offsets, records, strict=True))
    return offsets, ok
