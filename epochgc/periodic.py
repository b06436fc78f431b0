"""A background worker that runs one function every interval, for lease
heartbeats and the reconciler's stall backstop.

It waits on a condition of its runtime, so ``stop()`` returns promptly
instead of sleeping out the interval, and so the simulation runs it as a
task on virtual time (production's runtime gives it a daemon thread). The
function handles its own errors; one that escapes is logged and the loop
goes on, because a periodic duty that dies silently (a heartbeat) is worse
than one that keeps trying.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from epochgc.runtime import SYSTEM, Flag, Runtime

log = logging.getLogger(__name__)


class PeriodicThread:
    """Calls ``fn`` every ``interval_seconds`` until stopped.

    Example::

        loop = PeriodicThread("lease-heartbeat", 5.0, leases.renew_all)
        loop.start()
        ...
        loop.stop()
    """

    def __init__(
        self,
        name: str,
        interval_seconds: float,
        fn: Callable[[], object],
        *,
        runtime: Runtime = SYSTEM,
    ) -> None:
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be > 0")
        self._name = name
        self._interval = interval_seconds
        self._fn = fn
        self._runtime = runtime
        self._stop = Flag()
        self._changed = runtime.condition(runtime.lock())
        """Wakes the worker's wait early (``stop``), and ``stop`` once the
        worker has ended."""
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Start the loop.

        Raises:
            RuntimeError: already started.
        """
        with self._changed:
            if self._running:
                raise RuntimeError(f"{self._name} already running")
            self._stop = Flag()
            self._running = True
        self._runtime.spawn(f"epochgc-{self._name}", self._run)

    def stop(self) -> None:
        """Stop the loop and wait for the current call to finish; idempotent."""
        with self._changed:
            self._stop.set()
            self._changed.notify_all()
            while self._running:
                self._changed.wait()

    def _run(self) -> None:
        stop = self._stop
        try:
            while True:
                with self._changed:
                    if not stop.is_set():
                        self._changed.wait(self._interval)
                    if stop.is_set():
                        return
                try:
                    self._fn()
                except Exception:
                    log.exception(
                        "%s: periodic call failed; trying again next interval", self._name
                    )
        finally:
            with self._changed:
                self._running = False
                self._changed.notify_all()
