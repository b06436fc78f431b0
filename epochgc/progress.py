"""Progress lines for long work: ``done/total``, rate and ETA, logged at
most every few seconds under the caller's logger name.

A log line rather than a terminal bar because the long runs (sweeps, Spark
jobs, benchmarks) usually run under a daemon or in CI, where a log line is
what an operator sees; it costs nothing when the run is short.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from epochgc.logging_setup import SHOWN
from epochgc.runtime import SYSTEM


class ProgressLog:
    """Logs ``label: done/total unit (rate/s, ETA)`` at most every
    ``every_seconds``, and once more when ``done`` reaches ``total`` (unless
    the whole work took less than ``every_seconds``).

    Thread-safe: workers may call ``advance`` concurrently.

    Example::

        progress = ProgressLog(log, "sweep", total=16, unit="shards")
        for shard in shards:
            ...
            progress.advance(1, deleted=n)
    """

    def __init__(
        self,
        logger: logging.Logger,
        label: str,
        total: int | None,
        *,
        unit: str = "",
        every_seconds: float = 5.0,
        clock: Callable[[], float] = SYSTEM.monotonic,
    ) -> None:
        self._log = logger
        self._label = label
        self._total = total
        self._unit = f" {unit}" if unit else ""
        self._every = every_seconds
        self._clock = clock
        self._started = clock()
        self._last = self._started
        self._done = 0
        self._finished_logged = False
        self._extra: dict[str, int] = {}
        self._lock = threading.Lock()

    def advance(self, amount: int = 1, **extra: int) -> None:
        """Count ``amount`` more done (and add to named side counters)."""
        with self._lock:
            self._done += amount
            for name, value in extra.items():
                self._extra[name] = self._extra.get(name, 0) + value
            self._maybe_log(self._done)

    def update(self, done: int) -> None:
        """Set the absolute count done."""
        with self._lock:
            self._done = done
            self._maybe_log(done)

    def _maybe_log(self, done: int) -> None:
        now = self._clock()
        finished = self._total is not None and done >= self._total
        if self._finished_logged or (now - self._last < self._every and not finished):
            return
        if finished and now - self._started < self._every:
            # Short work needs no progress line: its caller logs the result.
            self._finished_logged = True
            return
        self._last = now
        self._finished_logged = finished
        elapsed = now - self._started
        rate = done / elapsed if elapsed > 0 else 0.0
        extra = "".join(f", {name} {value}" for name, value in self._extra.items())
        if self._total is None:
            self._log.info(
                "%s: %d%s (%.0f/s%s)", self._label, done, self._unit, rate, extra, extra=SHOWN
            )
            return
        left = self._total - done
        eta = (
            f"ETA {left / rate:.0f}s" if rate > 0 and left > 0 else "done" if left <= 0 else "ETA ?"
        )
        self._log.info(
            "%s: %d/%d%s (%.1f/s, %s%s)",
            self._label,
            done,
            self._total,
            self._unit,
            rate,
            eta,
            extra,
            extra=SHOWN,
        )
