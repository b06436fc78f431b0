"""Progress lines: rate and ETA, throttled, silent for short work."""

from __future__ import annotations

import logging

import pytest

from epochgc.progress import ProgressLog
from tests.support.clocks import SetClock


def test_logs_rate_and_eta_at_most_every_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = SetClock(0.0)
    progress = ProgressLog(
        logging.getLogger("epochgc.test"), "sweep", 100, unit="shards", clock=clock
    )
    with caplog.at_level(logging.INFO, "epochgc.test"):
        clock.at = 1.0
        progress.advance(10)
        assert not caplog.records
        clock.at = 5.0
        progress.advance(40, deleted=7)
        clock.at = 6.0
        progress.advance(10)
        clock.at = 20.0
        progress.update(100)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "sweep: 50/100 shards (10.0/s, ETA 5s, deleted 7)",
        "sweep: 100/100 shards (5.0/s, done, deleted 7)",
    ]


def test_short_work_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    clock = SetClock(0.0)
    progress = ProgressLog(logging.getLogger("epochgc.test"), "sweep", 4, clock=clock)
    with caplog.at_level(logging.INFO, "epochgc.test"):
        clock.at = 0.5
        progress.advance(4)
    assert not caplog.records
