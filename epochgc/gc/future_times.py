"""Telling people about stored times from the future (``epochgc.storage.stored_time``):
one warning per writer and document, a count for every document read
that holds one.

Why once per writer: a host whose clock runs ahead keeps finding its times
read as unknown round after round; one line naming it and its skew is what
an operator needs, a line per round would bury the log. Why count every
reading: the alert (``EpochgcClockSkew``) must keep firing while the skew
lasts and clear when it is gone.

Example::

    events.subscribe(FutureTimeFound, lambda e: metrics.future_times.labels(e.document).inc())
    seen = FutureTimeLog(events=events)
    seen.note(found)          # logs the first time this writer shows up
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from epochgc.events import Event, EventChannel
from epochgc.storage.stored_time import FutureTime

log = logging.getLogger("epochgc.gc.clock")


@dataclass(frozen=True)
class FutureTimeFound(Event):
    """A document of kind ``document`` was read holding a time from the
    future (once per writer in one ``FutureTimeLog.note``)."""

    document: str


class FutureTimeLog:
    """Logs each (document, writer) with a time from the future once, and
    publishes every reading of such a document as ``FutureTimeFound`` on
    ``events``, once per (document, writer) in one ``note``. Thread-safe:
    the daemon's jobs share one."""

    def __init__(self, events: EventChannel | None = None) -> None:
        self._events = events if events is not None else EventChannel()
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def note(self, found: Iterable[FutureTime]) -> None:
        """Record the readings of one document (or one pass over several)."""
        first_of_writer: dict[tuple[str, str], FutureTime] = {}
        for item in found:
            worst = first_of_writer.get((item.document, item.writer))
            if worst is None or item.skew_seconds > worst.skew_seconds:
                first_of_writer[(item.document, item.writer)] = item
        with self._lock:
            fresh = [v for k, v in first_of_writer.items() if k not in self._logged]
            self._logged.update(first_of_writer)
        for item in fresh:
            log.warning(
                "%s written by %s holds %s %.0fs ahead of this clock: read as unknown "
                "(work is done as if it never happened); is that host's clock wrong?",
                item.document,
                item.writer or "an unnamed writer",
                item.field,
                item.skew_seconds,
            )
        for document, _writer in first_of_writer:
            self._events.publish(FutureTimeFound(document))
