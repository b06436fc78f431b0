"""Test helpers: a reconciler node with its ownership (node lease +
ownership records), built the way ``reconciler.process.build_node`` builds
one but with the test's lease policy and clocks; a node that crashes; a
report published now."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

from epochgc.leases.node_lease import NodeLease
from epochgc.leases.ownership_round import NodeOwnership
from epochgc.leases.timing import LeasePolicy
from epochgc.reconciler.node import NodeSettings, ReconcilerNode
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.partition.directory import LeaderDirectory


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
    lease = NodeLease(store, root, node_id, policy=policy, now=now, monotonic=monotonic)
    ownership = NodeOwnership(
        store,
        root,
        lease,
        max_moves_per_round=max_moves_per_round,
        now=now,
        monotonic=monotonic,
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
    await node._publish_report(force=True)
