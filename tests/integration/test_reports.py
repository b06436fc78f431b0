"""Publishing and reading node reports on the embedded S3."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from epochgc.errors import TransientStorageError
from epochgc.storage.keys import PartitionId
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.partition.state import PartitionState
from epochgc.watermarks.safe_epoch.reports import (
    encode_report,
    publish_report,
    read_reports,
    report_of,
)
from tests.support.faults import TimesOutAfterApplyingStore
from tests.support.nodes import crash, eager_settings, publish_report_now, reconciler_node

ROOT = "epochgc"
NOW = datetime(2026, 11, 22, 3, 0, 5, tzinfo=UTC)


def test_reports_round_trip_and_bad_ones_are_skipped(store: S3ObjectStore) -> None:
    state = PartitionState.new(4)
    publish_report(
        store, "epochgc", report_of("node-1", NOW, [(PartitionId("orders", 4, 0), state)])
    )
    publish_report(
        store, "epochgc", report_of("node-2", NOW, [(PartitionId("orders", 4, 1), state)])
    )
    store.put("epochgc/meta/reports/node-3", b"{not json")
    store.put("epochgc/meta/reports/node-4", b'{"v": 7}')
    store.put("epochgc/meta/reports/node-5", b"NodeReport")
    store.put("epochgc/meta/reports/a/b", b"{}")
    reports, skipped = read_reports(store, "epochgc")
    assert sorted(r.node for r in reports) == ["node-1", "node-2"]
    assert sorted(s.key.rsplit("/", 1)[-1] for s in skipped) == ["b", "node-3", "node-4", "node-5"]
    assert any("newer" in s.reason for s in skipped)


def test_a_report_under_another_nodes_key_is_skipped(store: S3ObjectStore) -> None:
    store.put("epochgc/meta/reports/node-9", encode_report(report_of("node-1", NOW, [])))
    reports, skipped = read_reports(store, "epochgc")
    assert reports == []
    assert "names node 'node-1'" in skipped[0].reason


def _published(store: S3ObjectStore, node: str) -> dict[tuple[str, int], int]:
    reports, _ = read_reports(store, ROOT)
    return {
        (e.topic, e.partition): e.safe_epoch
        for r in reports
        if r.node == node
        for e in r.partitions
    }


def test_a_report_whose_answer_was_lost_is_never_followed_by_older_values(
    store: S3ObjectStore,
) -> None:
    """The PUT of a report lands but answers with an error; the node then
    stops leading: what it carries next is what landed, not the report
    before it (the true M dipped in verify seed 4 before this)."""

    async def scenario() -> None:
        controller = Controller(store, ROOT)
        controller.create_topic("orders", 1)
        flaky = TimesOutAfterApplyingStore(store, "put", "/meta/reports/")
        directory = LeaderDirectory()
        node, leases = reconciler_node(
            flaky,  # type: ignore[arg-type]
            ROOT,
            "node-a",
            directory,
            settings=eager_settings(),
        )
        await node.run_round()
        for _ in range(3):  # each tick: housekeeping's advance_epoch, then M(p) rises
            controller.tick()
            await node.run_round()
            await node.run_round()
        controller.tick()
        await node.run_round()  # housekeeping appends advance_epoch
        before = _published(store, "node-a")[("orders", 0)]
        flaky.armed = True
        with pytest.raises(TransientStorageError):
            await node.run_round()  # reconciling lifts M(p); its report's answer is lost
        landed = _published(store, "node-a")[("orders", 0)]
        assert landed > before
        await crash(node, directory)  # leads nothing now: the next report carries
        await publish_report_now(node)
        assert _published(store, "node-a")[("orders", 0)] == landed
        leases.stop(release=False)

    asyncio.run(scenario())
