"""Computing M from the bucket: controller tail + one report per node."""

from __future__ import annotations

from datetime import UTC, datetime

from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import SafeEpochTracker
from epochgc.watermarks.safe_epoch.compute import compute_safe_epoch
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    publish_report,
)

ROOT = "epochgc"
NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def publish(
    store: S3ObjectStore, node: str, *entries: tuple[str, int, int], revision: int = 6
) -> None:
    partitions = tuple(
        PartitionReport(t, revision, p, 1, m, 0, m + 1, m + 1) for t, p, m in entries
    )
    publish_report(store, ROOT, NodeReport(node, NOW, partitions))


def test_m_from_reports_with_one_read_per_node(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    for _ in range(5):
        controller.tick()
    controller.create_topic("orders", 64)  # revision 6
    for _ in range(10):
        controller.tick()  # snap 16
    publish(store, "a", *[("orders", p, 12) for p in range(32)])
    publish(store, "b", *[("orders", p, 14) for p in range(32, 64)])
    store.put(f"{ROOT}/meta/reports/garbage", b"{")
    stats = RequestStats()
    stats.attach(store.client)
    tracker = SafeEpochTracker()
    result = compute_safe_epoch(Controller(store, ROOT), store, ROOT, tracker)
    assert result is not None and result.safe_epoch == 12
    assert result.partitions == 64 and result.unreported == 0
    assert {w.node for w in result.pinning} == {"a"}
    ops = stats.by_operation()
    assert ops["GetObject"] == 1 + 16 + 3, (
        "the controller snapshot (none yet), its entries, one report per node, none per partition"
    )


def test_an_unreadable_controller_entry_blocks_after_repeats(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    store.put_if_absent(f"{ROOT}/meta/controller/{2:020d}", b'{"v": 9, "type": "epoch_tick"}')
    tracker = SafeEpochTracker(blocked_after=3)
    for _ in range(3):
        assert compute_safe_epoch(Controller(store, ROOT), store, ROOT, tracker) is None
    assert tracker.is_blocked
