"""Telling people about stored times from the future (``epochgc.storage.stored_time``):
one warning per writer and document, a count for every document read
that holds one.

Why once per writer: a host whose clock runs ahead keeps finding its times
read as unknown round after round; one line naming it and its skew is what
an operator needs, a line per round would bury the log. Why count every
reading: the alert (``EpochgcClockSkew``) must keep firing while the skew
lasts and clear when it is gone.

Example::

    seen = FutureTimeLog(on_found=lambda doc: metrics.future_times.labels(doc).inc())
    seen.note(found)          # logs the first time this writer shows up
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from epochgc.storage.stored_time import FutureTime

log = logging.getLogger("epochgc.gc.clock")


class FutureTimeLog:
    """Logs each (document, writer) with a time from the future once, and
    reports every reading of such a document to ``on_found`` (its kind),
    once per (document, writer) in one ``note``. Thread-safe: the daemon's
    jobs share one."""

    def __init__(self, on_found: Callable[[str], None] | None = None) -> None:
        self._on_found = on_found
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
        if self._on_found is not None:
            for document, _writer in first_of_writer:
                self._on_found(document)
