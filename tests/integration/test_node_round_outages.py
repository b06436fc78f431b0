"""A reconciler node's round under a store that fails part of the time:
one failed read must not cost the node its whole round."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from epochgc.reconciler.node import ReconcilerNode
from epochgc.storage.keys import topic_meta_prefix
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.directory import LeaderDirectory
from tests.support.faults import OutageStore
from tests.support.nodes import QUICK_POLICY, eager_settings, reconciler_node

ROOT = "epochgc"
SETTINGS = eager_settings()


@contextlib.asynccontextmanager
async def leading_ours(
    store: S3ObjectStore,
) -> AsyncIterator[tuple[ReconcilerNode, OutageStore, int]]:
    """A node leading topic ``ours`` (one partition) through a store whose
    controller reads can be made to fail; yields the node, the switch and
    the topic's revision."""
    controller = Controller(store, ROOT)
    controller.tick()
    ours = controller.create_topic("ours", 1)
    flaky = OutageStore(store, f"{ROOT}/meta/controller")
    node, leases = reconciler_node(
        flaky,  # type: ignore[arg-type]
        ROOT,
        "node-a",
        LeaderDirectory(),
        settings=SETTINGS,
        policy=QUICK_POLICY,
    )
    leases.start()
    try:
        for _ in range(3):
            await node.run_round()
        assert node.led_partitions(), "the node leads the topic before the outage"
        yield node, flaky, ours.revision
    finally:
        flaky.down = False
        await node.stop()
        leases.stop()


def test_a_controller_outage_still_lets_the_node_reconcile_and_report(
    store: S3ObjectStore,
) -> None:
    # Seen in `epochgc verify`: one failed controller read ended the whole
    # round, so nothing was reconciled or reported, and a node under a few
    # percent of failed requests published its report rarely, pinning M.
    asyncio.run(_outage(store))


async def _outage(store: S3ObjectStore) -> None:
    async with leading_ours(store) as (node, flaky, _revision):
        published = node.stats.reports_published
        flaky.down = True
        await node.run_round()
        await node.run_round()
        assert node.stats.reports_published == published + 2
        assert node.led_partitions(), "the node keeps leading on the view it had"


def test_a_node_leads_nothing_new_on_a_view_it_could_not_refresh(store: S3ObjectStore) -> None:
    # Seen in `epochgc verify` once rounds went on without a fresh view: a
    # node re-led a partition of a topic deleted meanwhile, whose log the
    # janitor had removed, and acknowledged offsets 0.. a second time.
    asyncio.run(_stale(store))


async def _stale(store: S3ObjectStore) -> None:
    async with leading_ours(store) as (node, flaky, revision):
        (pid,) = node.led_partitions()
        await node.leadership.step_down(
            pid, "its leader failed"
        )  # owned, not led: next round re-leads
        flaky.down = True
        Controller(store, ROOT).delete_topic("ours")
        meta = topic_meta_prefix(ROOT, "ours", revision)
        store.delete_batch([o.key for o in store.list_objects(meta)])  # the janitor's part
        await node.run_round()
        assert node.led_partitions() == []
        assert list(store.list_objects(meta)) == [], "nothing written for a deleted topic"
