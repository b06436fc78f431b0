"""Topic incarnations: deleting a topic and creating one with the same name
gives a partition that shares nothing with the old one.

The regression this guards against (found on the embedded S3): the new
incarnation reused the old partition log and snapshot, which were keyed by
name only. The collector floored the partition at ``revision - 1`` of the
*new* topic and deleted the L0 object that the old, still unreconciled
placeholders point into; the reconciler then failed every round on
``NoSuchKey``, the new topic's records were acknowledged at offset 5 instead
of 0 and could never be read, and ``M`` stopped moving for the cluster.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.reconciler.reader import PartitionReader
from epochgc.storage.keys import parse_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import join_safe_epoch
from epochgc.watermarks.safe_epoch.reports import read_reports
from tests.support.nodes import QUICK_POLICY, eager_settings, node_and_producer, publish_report_now

ROOT = "epochgc"
SETTINGS = eager_settings()


def test_recreated_topic_starts_empty_and_gc_keeps_moving(store: S3ObjectStore) -> None:
    asyncio.run(_delete_and_recreate(store))


async def _delete_and_recreate(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    first = controller.create_topic("orders", 1)
    async with node_and_producer(
        store, ROOT, controller, settings=SETTINGS, policy=QUICK_POLICY
    ) as n:
        node, producer = n.node, n.producer
        await node.run_round()
        # Five records the reconciler never gets to: the node runs no round
        # between the produce and the delete.
        old_offsets = await producer.produce("orders", 0, [b"old-%d" % i for i in range(5)])
        assert old_offsets == [0, 1, 2, 3, 4]
        await asyncio.to_thread(controller.tick)
        await asyncio.to_thread(controller.delete_topic, "orders")
        await asyncio.to_thread(controller.tick)
        second = await asyncio.to_thread(controller.create_topic, "orders", 1)
        assert second.revision > first.revision

        # The collector now deletes the old incarnation's L0 object: its
        # epoch is below the new topic's revision and no live partition
        # needs it.
        outcome = await asyncio.to_thread(
            collect_once,
            store,
            RequestStats(),
            ROOT,
            CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0),
        )
        assert outcome.summary.deleted >= 1

        await node.run_round()
        new_offsets = await producer.produce("orders", 0, [b"new-%d" % i for i in range(3)])
        assert new_offsets == [0, 1, 2], "a new incarnation starts at offset 0"
        await producer.close()
        errors_before = node.stats.errors
        # An idle partition's M(p) trails the epoch by two housekeeping
        # rounds (docs/architecture.md, "Life of an L0 object", step 5): two
        # ticks, each followed by rounds.
        for _ in range(2):
            await asyncio.to_thread(controller.tick)
            for _ in range(3):
                await node.run_round()
        assert node.stats.errors == errors_before, "reconciling the new incarnation fails"
        await publish_report_now(node)

    rows = await asyncio.to_thread(PartitionReader(store, ROOT).read, "orders", 0)
    assert rows == [(0, b"new-0"), (1, b"new-1"), (2, b"new-2")]
    reports, skipped = await asyncio.to_thread(read_reports, store, ROOT)
    assert skipped == []
    safe = join_safe_epoch(await asyncio.to_thread(controller.snapshot), reports)
    assert safe.safe_epoch >= second.revision, "M moves past the new incarnation's revision"
    left = [parse_l0_key(o.key, ROOT) for o in store.list_objects(f"{ROOT}/l0/")]
    assert all(k is not None and k.epoch >= second.revision for k in left)
