"""The ``control`` job: the collector follows the control document, and a
change of state is handed to the daemon."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from epochgc.events import EventChannel
from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import Collector
from epochgc.gc.control import CollectorState, pause, resume
from epochgc.gc.daemon.contacts import StoreContacts
from epochgc.gc.daemon.control_poll import CollectorStateChanged, ControlPoll
from epochgc.metrics.instruments import CollectorRegistry, GcMetrics
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import gc_control_key
from epochgc.storage.request_stats import RequestStats

ROOT = "epochgc"
T0 = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)


def test_a_pause_and_a_resume_are_applied_and_handed_on_once_each() -> None:
    store, metrics, contacts = (
        MemoryStore(),
        GcMetrics(CollectorRegistry()),
        StoreContacts(lambda: 0.0),
    )
    settings = CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0)
    collector = Collector(store, RequestStats(), ROOT, settings)
    changes: list[tuple[CollectorState, CollectorState]] = []
    events = EventChannel()
    events.subscribe(CollectorStateChanged, lambda e: changes.append((e.before, e.after)))
    poll = ControlPoll(store, ROOT, collector, metrics, contacts, events)
    poll()
    pause(store, ROOT, by="ops", reason="looking", now=T0)
    poll()
    poll()
    assert collector.state is CollectorState.PAUSED
    assert metrics.registry.get_sample_value("epochgc_collector_state", {"state": "paused"}) == 1
    resume(store, ROOT, by="ops", now=T0)
    poll()
    assert changes == [
        (CollectorState.RUNNING, CollectorState.PAUSED),
        (CollectorState.PAUSED, CollectorState.RUNNING),
    ]
    assert contacts.snapshot()["control"].failing_since is None


def test_an_unreadable_control_document_keeps_the_state_and_fails_the_contact() -> None:
    store, contacts = MemoryStore(), StoreContacts(lambda: 0.0)
    settings = CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0)
    collector = Collector(store, RequestStats(), ROOT, settings)
    pause(store, ROOT, by="ops", reason="looking", now=T0)
    poll = ControlPoll(
        store, ROOT, collector, GcMetrics(CollectorRegistry()), contacts, EventChannel()
    )
    poll()
    store.put(gc_control_key(ROOT), b"{not json")
    poll()
    assert collector.state is CollectorState.PAUSED
    assert contacts.snapshot()["control"].last_error.startswith("MalformedRecordError")
