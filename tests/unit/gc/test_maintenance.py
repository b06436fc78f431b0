"""The leader's tidying decisions: run retention and report silence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from epochgc.gc.maintenance import ReportWatch
from epochgc.gc.run_report import expired_runs, new_run_id
from epochgc.reconciler.service import default_node_id
from epochgc.storage.keys import is_valid_node_id
from epochgc.storage.object_store import ObjectInfo

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_runs_past_the_retention_expire_and_foreign_ids_stay() -> None:
    old = new_run_id(NOW - timedelta(days=31))
    young = new_run_id(NOW - timedelta(days=29))
    assert expired_runs([young, old, "hand-made"], NOW, timedelta(days=30)) == [old]


def info(node: str, etag: str) -> ObjectInfo:
    return ObjectInfo(f"epochgc/meta/reports/{node}", 10, etag, NOW)


def test_a_report_is_silent_only_while_its_etag_stays() -> None:
    watch = ReportWatch()
    assert watch.observe([info("a", "1"), info("b", "1")], "epochgc", 100.0) == {
        "a": 0.0,
        "b": 0.0,
    }
    assert watch.observe([info("a", "1"), info("b", "2")], "epochgc", 700.0) == {
        "a": 600.0,
        "b": 0.0,
    }
    # A report that disappeared and came back starts over.
    watch.observe([info("b", "2")], "epochgc", 800.0)
    assert watch.observe([info("a", "1")], "epochgc", 900.0) == {"a": 0.0}


def test_the_default_node_id_is_stable_across_restarts() -> None:
    first = default_node_id()
    assert first == default_node_id() and is_valid_node_id(first)
