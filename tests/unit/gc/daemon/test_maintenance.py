"""The leader's tidying decisions: run retention and report silence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from epochgc.gc.control import DeletingJob, pause, resume
from epochgc.gc.daemon.maintenance import (
    CompactionJob,
    LeaderMaintenance,
    MaintenanceJob,
    MaintenanceSettings,
    ReportWatch,
)
from epochgc.gc.pause import GuardedStore, PauseGuard
from epochgc.gc.run_report import expired_runs, new_run_id
from epochgc.metrics.instruments import CollectorRegistry, GcMetrics
from epochgc.runtime import Runtime
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import is_valid_node_id
from epochgc.storage.object_store import ObjectInfo
from epochgc.watermarks.controller import Controller
from epochgc.wiring.settings import default_node_id

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_runs_past_the_retention_expire_and_foreign_ids_stay() -> None:
    old = new_run_id(NOW - timedelta(days=31))
    young = new_run_id(NOW - timedelta(days=29))
    stored_at = {
        young: NOW - timedelta(days=29),
        old: NOW - timedelta(days=31),
        "hand-made": NOW - timedelta(days=300),
    }
    assert expired_runs(stored_at, NOW, timedelta(days=30)) == [old]


def test_run_retention_rests_on_the_store_clock_not_the_writer_clock() -> None:
    """A collector 40 days behind names its run 40 days ago; a collector 30
    days ahead names it 30 days on: only the store's timestamp counts, and
    one from the future (this clock is behind the store's) keeps the run."""
    behind = new_run_id(NOW - timedelta(days=40))
    ahead = new_run_id(NOW + timedelta(days=30))
    stored_at = {behind: NOW - timedelta(hours=1), ahead: NOW - timedelta(days=31)}
    assert expired_runs(stored_at, NOW, timedelta(days=30)) == [ahead]
    future = {behind: NOW + timedelta(days=60)}
    assert expired_runs(future, NOW + timedelta(days=400), timedelta(days=30)) == [behind]
    assert expired_runs(future, NOW, timedelta(days=0)) == [], "unknown age: kept"


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


def maintenance_job(
    store: MemoryStore, guard: PauseGuard, leading: bool, tidied: list[str]
) -> MaintenanceJob:
    tidy_store = GuardedStore(store, guard, DeletingJob.TIDYING)
    maintenance = LeaderMaintenance(tidy_store, "epochgc", MaintenanceSettings(), now=lambda: NOW)
    return MaintenanceJob(
        maintenance,
        guard,
        Controller(store, "epochgc"),
        GcMetrics(CollectorRegistry()),
        lambda: tidied.append("presence"),
        lambda: leading,
    )


def test_only_a_leader_tidies_and_a_pause_holds_it(caplog: pytest.LogCaptureFixture) -> None:
    store, tidied = MemoryStore(), []
    guard = PauseGuard(store, "epochgc")
    maintenance_job(store, guard, False, tidied)()
    assert tidied == [] and store.count() == 0
    maintenance_job(store, guard, True, tidied)()
    assert tidied == ["presence"]
    pause(store, "epochgc", by="ops", reason="looking", now=NOW)
    with caplog.at_level("INFO", logger="epochgc.gc.daemon"):
        maintenance_job(store, guard, True, tidied)()
    assert tidied == ["presence"], "held: presence documents kept too"
    assert "tidying held" in caplog.text
    assert [h.job for h in guard.held()] == [DeletingJob.TIDYING]


def test_only_a_leader_compacts_and_a_pause_holds_it(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    guard = PauseGuard(store, "epochgc")
    Controller(store, "epochgc", runtime=Runtime(wall=lambda: NOW)).tick()
    standby = CompactionJob(
        Controller(store, "epochgc"), guard, min_entries=0, leading=lambda: False
    )
    standby()
    assert standby.last_result is None
    pause(store, "epochgc", by="ops", reason="looking", now=NOW)
    leader = CompactionJob(Controller(store, "epochgc"), guard, min_entries=0, leading=lambda: True)
    with caplog.at_level("INFO", logger="epochgc.gc.daemon"):
        leader()
    assert leader.last_result is None and "controller compaction held" in caplog.text
    assert [h.job for h in guard.held()] == [DeletingJob.CONTROLLER_TRUNCATION]
    guard.release_all()
    resume(store, "epochgc", by="ops", now=NOW)
    leader()
    assert leader.last_result is not None and leader.last_result.snapshot_written
