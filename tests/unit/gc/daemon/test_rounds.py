"""The ``gc`` job (a round while leading, its metrics) and the status
document, on the clocks the daemon is given."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

from epochgc.events import EventChannel
from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import Collector, RoundOutcome, RoundReport
from epochgc.gc.control import CollectorState, StatusDocument, read_status
from epochgc.gc.daemon.contacts import StoreContacts
from epochgc.gc.daemon.rounds import RoundJob, StatusPublisher, observe_round
from epochgc.gc.pause import PauseGuard
from epochgc.gc.sweeper import DeleteBatchDone
from epochgc.metrics.instruments import CollectorRegistry, GcMetrics
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import encode_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import Controller
from tests.support.clocks import SetClock

ROOT = "epochgc"
PAST = datetime(2001, 1, 2, 3, 4, 5, tzinfo=UTC)


def collector(store: MemoryStore) -> Collector:
    settings = CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0)
    return Collector(store, RequestStats(), ROOT, settings)


def test_a_collectors_rounds_sweep_on_the_channel_it_is_given() -> None:
    store = MemoryStore()
    controller = Controller(store, ROOT)
    while controller.current_epoch() < 3:
        controller.tick()
    key = encode_l0_key(ROOT, 0, 1, str(uuid.UUID(int=1)))
    store.put(key, b"x")
    events = EventChannel()
    done: list[DeleteBatchDone] = []
    events.subscribe(DeleteBatchDone, done.append)
    settings = CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0)
    report = Collector(store, RequestStats(), ROOT, settings, events=events).run_round()
    assert report.outcome is RoundOutcome.COLLECTED, report.error
    assert [o.key for batch in done for o in batch.deleted] == [key]


def rounds_total(metrics: GcMetrics, outcome: str) -> float | None:
    return metrics.registry.get_sample_value("epochgc_collector_rounds_total", {"outcome": outcome})


def test_a_standby_runs_no_round_and_shows_it() -> None:
    store, metrics = MemoryStore(), GcMetrics(CollectorRegistry())
    metrics.leader.set(1)
    job = RoundJob(
        collector(store),
        metrics,
        StoreContacts(lambda: 0.0),
        lambda: False,
        threading.Event(),
        now=SetClock(PAST),
        monotonic=lambda: 0.0,
    )
    assert job() is None
    assert job.rounds == 0 and store.count() == 0
    assert metrics.registry.get_sample_value("epochgc_collector_leader") == 0


def test_a_leader_runs_a_round_and_the_sweep_lag_is_on_the_daemons_clock() -> None:
    store, metrics, clock = MemoryStore(), GcMetrics(CollectorRegistry()), SetClock(PAST)
    contacts = StoreContacts(lambda: 0.0)
    job = RoundJob(
        collector(store),
        metrics,
        contacts,
        lambda: True,
        threading.Event(),
        now=clock,
        monotonic=lambda: 0.0,
    )
    clock.at = PAST + timedelta(seconds=90)
    assert job.sweep_lag_seconds() == 90.0, "since the job was built"
    report = job()
    assert report is not None and report.outcome is RoundOutcome.IDLE
    assert (job.rounds, job.last_report) == (1, report)
    assert job.sweep_lag_seconds() == 0.0, "a clean round"
    clock.at += timedelta(seconds=5)
    assert job.sweep_lag_seconds() == 5.0
    assert rounds_total(metrics, "idle") == 1
    assert contacts.snapshot()["round"].failing_since is None


def test_a_stopping_daemon_runs_no_round() -> None:
    stopping = threading.Event()
    stopping.set()
    job = RoundJob(
        collector(MemoryStore()),
        GcMetrics(CollectorRegistry()),
        StoreContacts(lambda: 0.0),
        lambda: True,
        stopping,
        now=SetClock(PAST),
        monotonic=lambda: 0.0,
    )
    assert job() is None and job.rounds == 0


def test_a_round_without_a_sweep_counts_its_outcome_only() -> None:
    metrics = GcMetrics(CollectorRegistry())
    observe_round(metrics, RoundReport(RoundOutcome.PAUSED, CollectorState.PAUSED), 1.0)
    assert rounds_total(metrics, "paused") == 1
    state = {"state": "paused"}
    assert metrics.registry.get_sample_value("epochgc_collector_state", state) == 1
    count = "epochgc_collector_round_duration_seconds_count"
    assert metrics.registry.get_sample_value(count) == 0


def test_the_status_shows_the_daemons_clock_and_no_next_round_while_stopping() -> None:
    store, stopping = MemoryStore(), threading.Event()
    c = collector(store)
    publish = StatusPublisher(
        store, ROOT, c, "gc-a/01", PauseGuard(store, ROOT), stopping=stopping, now=SetClock(PAST)
    )
    finished = PAST - timedelta(seconds=1)
    publish(
        RoundReport(
            RoundOutcome.FAILED, CollectorState.RUNNING, error="boom", finished_at=finished
        ),
        PAST + timedelta(seconds=30),
    )
    assert read_status(store, ROOT) == StatusDocument(
        state=CollectorState.RUNNING,
        holder="gc-a/01",
        updated_at=PAST,
        last_outcome="failed",
        next_round_at=PAST + timedelta(seconds=30),
        detail="boom",
        last_round_at=finished,
    )
    stopping.set()
    publish(None, PAST + timedelta(seconds=30))
    status = read_status(store, ROOT)
    assert status is not None
    assert (status.next_round_at, status.last_outcome, status.last_round_at) == (None, None, None)
