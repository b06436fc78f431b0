"""Topics another system reconciles are never led by epochgc's reconciler.

A topic whose ``create_topic`` config names another reconciler
(``"reconciler": "kafscale"``) has its partition logs kept by that system.
An epochgc reconciler that led it anyway would find an empty, idle
partition and publish ``M(p)`` close to the cluster epoch, and the
collector would delete objects the other system has not reconciled yet.
"""

from __future__ import annotations

import asyncio

from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.safe_epoch.aggregate import join_safe_epoch
from epochgc.watermarks.safe_epoch.reports import read_reports
from tests.support.nodes import QUICK_POLICY, eager_settings, publish_report_now, reconciler_node

ROOT = "epochgc"
SETTINGS = eager_settings()


def test_a_reconciler_leads_only_topics_it_reconciles(store: S3ObjectStore) -> None:
    asyncio.run(_rounds(store))


async def _rounds(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    theirs = controller.create_topic("theirs", 2, {"reconciler": "kafscale"})
    ours = controller.create_topic("ours", 1, {"reconciler": "epochgc"})
    legacy = controller.create_topic("legacy", 1)  # no key: epochgc's, as before
    odd = controller.create_topic("odd", 1, {"reconciler": 7})  # not a name: not ours
    node, leases = reconciler_node(
        store, ROOT, "node-a", LeaderDirectory(), settings=SETTINGS, policy=QUICK_POLICY
    )
    leases.start()
    try:
        for _ in range(3):
            await asyncio.to_thread(controller.tick)
            for _ in range(3):
                await node.run_round()
        await publish_report_now(node)
        led = {(pid.topic, pid.partition) for pid in node.led_partitions()}
    finally:
        await node.stop()
        leases.stop()

    assert led == {("ours", 0), ("legacy", 0)}
    owners = {o.key.split("/")[3] for o in store.list_objects(f"{ROOT}/meta/owners/")}
    assert owners == {"ours", "legacy"}, "ownership records only for epochgc's topics"
    reports, skipped = await asyncio.to_thread(read_reports, store, ROOT)
    assert skipped == []
    reported = {e.topic for r in reports for e in r.partitions}
    assert reported == {"ours", "legacy"}
    safe = join_safe_epoch(await asyncio.to_thread(controller.snapshot), reports)
    assert safe.safe_epoch == min(theirs.revision, odd.revision) - 1, (
        "the other system's topic pins M until it reports"
    )
    assert ours.revision and legacy.revision
