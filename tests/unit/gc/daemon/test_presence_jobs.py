"""The daemon's presence jobs: its own document, written on the clock it is
given, and the leader's tidying of the documents of daemons gone for good."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from epochgc.gc.control import DeletingJob, pause
from epochgc.gc.daemon.contacts import StoreContacts
from epochgc.gc.daemon.presence_jobs import PresenceRefresh, PresenceTidy
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.pause import GuardedStore, PauseGuard
from epochgc.gc.presence import PresenceDocument, read_presences, write_presence
from epochgc.metrics.instruments import CollectorRegistry, GcMetrics
from epochgc.simulate.memory_store import MemoryStore

ROOT = "epochgc"
PAST = datetime(2001, 1, 2, 3, 4, 5, tzinfo=UTC)


class Daemon:
    """What the refresh asks of the daemon: its role, state and URL."""

    def __init__(self) -> None:
        self.role = "standby"

    def describe(self) -> tuple[str, str, str | None]:
        return self.role, "running", "http://127.0.0.1:9464"


def refresh_of(store: MemoryStore, daemon: Daemon, stopping: threading.Event) -> PresenceRefresh:
    return PresenceRefresh(
        store,
        ROOT,
        "gc-a",
        "gc-a/01",
        60.0,
        daemon.describe,
        contacts=StoreContacts(lambda: 0.0),
        stopping=stopping,
        now=lambda: PAST,
    )


def test_the_document_shows_the_daemons_clock_and_role() -> None:
    store, daemon = MemoryStore(), Daemon()
    refresh = refresh_of(store, daemon, threading.Event())
    refresh()
    assert read_presences(store, ROOT) == (
        [
            PresenceDocument(
                "gc-a", "gc-a/01", "standby", "running", PAST, PAST, 60.0, "http://127.0.0.1:9464"
            )
        ],
        [],
    )


def test_a_change_of_role_is_written_at_once_and_only_then() -> None:
    store, daemon = MemoryStore(), Daemon()
    refresh = refresh_of(store, daemon, threading.Event())
    refresh.refresh_if_role_changed()
    assert store.count("PutObject") == 0, "nothing written yet: the presence job writes first"
    refresh()
    refresh.refresh_if_role_changed()
    assert store.count("PutObject") == 1
    daemon.role = "leader"
    refresh.refresh_if_role_changed()
    assert store.count("PutObject") == 2
    assert read_presences(store, ROOT)[0][0].role == "leader"


def test_a_stopping_daemon_writes_nothing_and_deletes_its_document() -> None:
    store, stopping = MemoryStore(), threading.Event()
    refresh = refresh_of(store, Daemon(), stopping)
    refresh()
    stopping.set()
    refresh()
    assert store.count("PutObject") == 1
    refresh.delete_own()
    assert read_presences(store, ROOT) == ([], [])


def presence(node: str, updated_at: datetime) -> PresenceDocument:
    return PresenceDocument(node, f"{node}/01", "standby", "running", updated_at, updated_at, 60.0)


def presences_deleted(metrics: GcMetrics) -> float:
    value = metrics.registry.get_sample_value(
        "epochgc_collector_maintenance_deleted_total", {"kind": "presence"}
    )
    return value or 0.0


def tidy_of(store: MemoryStore, guard: PauseGuard, metrics: GcMetrics) -> PresenceTidy:
    return PresenceTidy(
        store,
        GuardedStore(store, guard, DeletingJob.TIDYING),
        ROOT,
        "gc-a",
        600.0,
        margin_seconds=5.0,
        future_log=FutureTimeLog(),
        metrics=metrics,
        now=lambda: PAST,
    )


def test_documents_gone_for_good_by_the_daemons_clock_are_deleted() -> None:
    store, metrics = MemoryStore(), GcMetrics(CollectorRegistry())
    write_presence(store, ROOT, presence("gc-a", PAST - timedelta(days=1)))  # itself: kept
    write_presence(store, ROOT, presence("gc-old", PAST - timedelta(seconds=781)))
    write_presence(store, ROOT, presence("gc-new", PAST - timedelta(seconds=779)))
    tidy_of(store, PauseGuard(store, ROOT), metrics)()
    assert [d.node for d in read_presences(store, ROOT)[0]] == ["gc-a", "gc-new"]
    assert presences_deleted(metrics) == 1


def test_a_pause_holds_the_tidying(caplog: pytest.LogCaptureFixture) -> None:
    store, metrics = MemoryStore(), GcMetrics(CollectorRegistry())
    write_presence(store, ROOT, presence("gc-old", PAST - timedelta(days=1)))
    pause(store, ROOT, by="ops", reason="looking", now=PAST)
    guard = PauseGuard(store, ROOT)
    with caplog.at_level("INFO", logger="epochgc.gc.daemon"):
        tidy_of(store, guard, metrics)()
    assert [d.node for d in read_presences(store, ROOT)[0]] == ["gc-old"]
    assert presences_deleted(metrics) == 0
    assert "tidying of presence documents held" in caplog.text
    assert [h.job for h in guard.held()] == [DeletingJob.TIDYING]
