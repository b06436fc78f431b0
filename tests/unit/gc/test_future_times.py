"""Stored times from the future are logged once per writer and counted
every time a document holding one is read."""

from __future__ import annotations

import logging

import pytest

from epochgc.gc.future_times import FutureTimeLog
from epochgc.storage.stored_time import FutureTime
from tests.support.events import found_into


def test_each_writer_is_logged_once_and_every_reading_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted: list[str] = []
    seen = FutureTimeLog(events=found_into(counted))
    a = [
        FutureTime("shard_knowledge", "gc-fast", "full_sweep_at", 86400.0),
        FutureTime("shard_knowledge", "gc-fast", "shards.001.listed_at", 2 * 86400.0),
    ]
    with caplog.at_level(logging.WARNING, logger="epochgc.gc.clock"):
        seen.note(a)
        seen.note(a)  # the next round reads the same document again
        seen.note([FutureTime("report", "node-7", "generated_at", 120.0)])
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "gc-fast" in lines[0] and "172800s ahead" in lines[0]
    assert "node-7" in lines[1] and "120s ahead" in lines[1]
    assert counted == ["shard_knowledge", "shard_knowledge", "report"]


def test_nothing_found_logs_and_counts_nothing(caplog: pytest.LogCaptureFixture) -> None:
    counted: list[str] = []
    with caplog.at_level(logging.WARNING, logger="epochgc.gc.clock"):
        FutureTimeLog(events=found_into(counted)).note([])
    assert caplog.records == [] and counted == []
