"""The daemon as a whole on an in-memory store: every time it writes is
read from the clock it is given, never from the real wall clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from epochgc.gc.control import read_status
from epochgc.gc.daemon.scheduler import GcDaemon
from epochgc.gc.presence import read_presences
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import report_key
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.safe_epoch.reports import NodeReport, encode_report
from tests.support.daemon_settings import quick_daemon_settings
from tests.support.waiting import wait_for

ROOT = "epochgc"
PAST = datetime(2001, 1, 2, 3, 4, 5, tzinfo=UTC)
"""Far from any real clock: a time read from the real clock cannot pass for it."""

SETTINGS = quick_daemon_settings("gc-a")


def test_a_daemon_on_a_clock_far_in_the_past_writes_that_time_everywhere() -> None:
    store = MemoryStore()
    report = NodeReport("node-1", PAST - timedelta(seconds=30), ())
    store.put(report_key(ROOT, "node-1"), encode_report(report))
    daemon = GcDaemon(store, RequestStats(), ROOT, SETTINGS, now=lambda: PAST)
    daemon.start()
    try:
        # The presence document says "leader" soon after the lease is taken,
        # not necessarily before the first round ends: wait for both.
        wait_for(
            lambda: (
                daemon.rounds > 0
                and read_status(store, ROOT) is not None
                and [p.role for p in read_presences(store, ROOT)[0]] == ["leader"]
            )
        )
        status = read_status(store, ROOT)
        presences, _unreadable = read_presences(store, ROOT)
        healthy, details = daemon.health()
    finally:
        daemon.stop()
    assert status is not None and status.updated_at == PAST
    soon = PAST + SETTINGS.schedule.interval
    assert status.next_round_at is not None and PAST <= status.next_round_at <= soon
    assert [(p.role, p.started_at, p.updated_at) for p in presences] == [("leader", PAST, PAST)]
    assert healthy and PAST <= details["next_round_at"] <= soon  # type: ignore[operator]
    sample = daemon.registry.get_sample_value
    assert sample("epochgc_collector_report_age_seconds", {"node": "node-1"}) == 30.0
    assert sample("epochgc_collector_sweep_lag_seconds") == 0.0
    assert read_presences(store, ROOT) == ([], []), "deleted on a clean stop"
    stopped = read_status(store, ROOT)
    assert stopped is not None and stopped.updated_at == PAST and stopped.next_round_at is None
