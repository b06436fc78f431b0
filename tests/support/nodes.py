"""Test helpers: a reconciler node with its ownership (node lease +
ownership records), built the way ``wiring.reconciler_process.build_node``
builds one but with the test's lease policy and clocks; a producer of the
kind integration tests use; the two together (``node_and_producer``), the
set-up of every write-path scenario; a node that crashes; a report
published now; the lease policy and node settings of quick scenarios."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from epochgc.ingest.producer import Producer
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.timing import LeasePolicy
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.reconciler.node import ReconcilerNode
from epochgc.reconciler.node_settings import NodeSettings
from epochgc.runtime import Runtime
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.epoch import EpochCache
from epochgc.watermarks.partition.directory import LeaderDirectory

QUICK_POLICY = LeasePolicy(ttl_seconds=3.0, renew_interval_seconds=0.3, skew_margin_seconds=0.3)
"""Leases that expire in 3 s: a scenario sees a takeover without waiting long."""


def eager_settings(**overrides: Any) -> NodeSettings:
    """A node that does not idle between rounds and reports every round
    (a snapshot every 1000 entries), but for ``overrides``."""
    settings: dict[str, Any] = {
        "idle_interval_seconds": 0.0,
        "report_interval_seconds": 0.0,
        "snapshot_every_entries": 1000,
    }
    return NodeSettings(**(settings | overrides))


def reconciler_node(
    store: ObjectStore,
    root: str,
    node_id: str,
    directory: LeaderDirectory,
    *,
    settings: NodeSettings | None = None,
    policy: LeasePolicy | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    monotonic: Callable[[], float] = time.monotonic,
    max_moves_per_round: int = 10_000,
) -> tuple[ReconcilerNode, NodeOwnership]:
    """A node (not started) and its ownership: ``ownership.start()`` starts
    the node lease's heartbeat, ``ownership.stop(release=...)`` ends it."""
    runtime = Runtime(wall=now, monotonic=monotonic)
    lease = NodeLease(store, root, node_id, policy=policy, runtime=runtime)
    ownership = NodeOwnership(
        store, root, lease, max_moves_per_round=max_moves_per_round, runtime=runtime
    )
    node = ReconcilerNode(
        store, root, node_id, ownership, directory, settings=settings, monotonic=monotonic, now=now
    )
    return node, ownership


async def crash(node: ReconcilerNode, directory: LeaderDirectory) -> None:
    """Stop serving without releasing anything, as a killed process would:
    ``node``'s leaders stop and leave ``directory``, its ownership stops
    without releasing; other nodes take over after the TTL."""
    for service in node.led_services():
        await service.stop("node crashed")
        await directory.unregister(service)
    await asyncio.to_thread(node.ownership.stop, release=False)


async def publish_report_now(node: ReconcilerNode) -> None:
    """Write ``node``'s report regardless of its report interval."""
    await node.duties.publish_report(node.live_partitions, force=True)


def producer_for(
    store: ObjectStore,
    root: str,
    directory: LeaderDirectory,
    controller: Controller,
    *,
    revision_of: Callable[[str], int] | None = None,
    epoch_ttl_seconds: float = 0.0,
    shards: int = 4,
    linger_seconds: float = 0.01,
    **options: Any,
) -> Producer:
    """A producer that finds leaders in ``directory``, reads the epoch from
    ``controller`` (uncached by default: every tick is seen at once) and
    each topic's revision from it too unless ``revision_of`` says; a short
    linger keeps the tests quick. ``options`` go to ``Producer``."""
    return Producer(
        store,
        root,
        directory,
        EpochCache(controller.current_epoch, ttl_seconds=epoch_ttl_seconds),
        revision_of or (lambda topic: controller.topic(topic).revision),
        shards=shards,
        linger_seconds=linger_seconds,
        **options,
    )


@dataclass(frozen=True)
class NodeAndProducer:
    """A running node's parts and a producer writing to its partitions."""

    node: ReconcilerNode
    ownership: NodeOwnership
    producer: Producer
    directory: LeaderDirectory


@asynccontextmanager
async def node_and_producer(
    store: ObjectStore,
    root: str,
    controller: Controller,
    *,
    node_id: str = "node-a",
    settings: NodeSettings | None = None,
    policy: LeasePolicy | None = None,
    **producer_options: Any,
) -> AsyncIterator[NodeAndProducer]:
    """A node with its lease heartbeat started (it leads nothing until its
    first ``run_round``) and a producer on the same leader directory; on
    the way out the node stops and releases what it owns. The producer is
    the test's to ``close()``: the test knows when its writes are done.

    Example::

        async with node_and_producer(store, ROOT, controller) as n:
            await n.node.run_round()
            await n.producer.produce("orders", 0, [b"a"])
            await n.producer.close()
    """
    directory = LeaderDirectory()
    node, ownership = reconciler_node(
        store, root, node_id, directory, settings=settings, policy=policy
    )
    ownership.start()
    producer = producer_for(store, root, directory, controller, **producer_options)
    try:
        yield NodeAndProducer(node, ownership, producer, directory)
    finally:
        await node.stop()
        ownership.stop()
