"""The ``reports`` job: node report ages on the daemon's clock, stale and
unreadable reports named, a report from the future of unknown age."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from epochgc.gc.daemon.contacts import StoreContacts
from epochgc.gc.daemon.report_ages import ReportAges
from epochgc.gc.future_times import FutureTimeLog
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import report_key
from epochgc.watermarks.safe_epoch.reports import NodeReport, encode_report
from tests.support.events import found_into
from tests.support.faults import OutageStore

ROOT = "epochgc"
PAST = datetime(2001, 1, 2, 3, 4, 5, tzinfo=UTC)


def report(store: Any, node: str, generated_at: datetime) -> None:
    store.put(report_key(ROOT, node), encode_report(NodeReport(node, generated_at, ())))


def ages_of(store: Any, found: list[str], contacts: StoreContacts) -> ReportAges:
    return ReportAges(
        store,
        ROOT,
        120.0,
        margin_seconds=5.0,
        contacts=contacts,
        future_log=FutureTimeLog(events=found_into(found)),
        now=lambda: PAST,
    )


def test_ages_are_measured_on_the_daemons_clock(caplog: pytest.LogCaptureFixture) -> None:
    store, found = MemoryStore(), []
    report(store, "node-old", PAST - timedelta(seconds=600))
    report(store, "node-new", PAST - timedelta(seconds=30))
    report(store, "node-fast", PAST + timedelta(days=30))
    store.put(report_key(ROOT, "node-bad"), b"{not json")
    ages = ages_of(store, found, StoreContacts(lambda: 0.0))
    assert ages.ages() == {}, "nothing read yet"
    with caplog.at_level("WARNING", logger="epochgc.gc.daemon"):
        ages()
    assert ages.ages() == {"node-old": 600.0, "node-new": 30.0, "node-fast": math.inf}
    assert found == ["report"], "the report from the future is counted"
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("epochgc.gc.daemon")]
    assert messages == [
        "1 node reports could not be read and were skipped: epochgc/meta/reports/node-bad",
        "stale node reports (older than 120s): node-fast, node-old; M may be held back by them",
    ]


def test_a_store_that_fails_keeps_the_last_ages_and_fails_the_contact() -> None:
    store = OutageStore(MemoryStore(), ROOT)
    report(store, "node-1", PAST - timedelta(seconds=10))
    contacts = StoreContacts(lambda: 0.0)
    ages = ages_of(store, [], contacts)
    ages()
    store.down = True
    ages()
    assert ages.ages() == {"node-1": 10.0}
    assert contacts.snapshot()["reports"].last_error.startswith("RetriesExhaustedError: injected")
