"""Publishing and reading node reports on the embedded S3."""

from __future__ import annotations

from datetime import UTC, datetime

from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.reports import encode_report, publish_report, read_reports, report_of
from epochgc.watermarks.state import PartitionState

NOW = datetime(2026, 11, 22, 3, 0, 5, tzinfo=UTC)


def test_reports_round_trip_and_bad_ones_are_skipped(store: S3ObjectStore) -> None:
    state = PartitionState.new(4)
    publish_report(store, "epochgc", report_of("node-1", NOW, [("orders", 0, state)]))
    publish_report(store, "epochgc", report_of("node-2", NOW, [("orders", 1, state)]))
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
