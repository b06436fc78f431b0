"""A background thread that runs one function every interval, for lease
heartbeats and (later) report publishing.

It waits on a ``threading.Event``, so ``stop()`` returns promptly instead of
sleeping out the interval. The function handles its own errors; one that
escapes is logged and the loop goes on, because a periodic duty that dies
silently (a heartbeat) is worse than one that keeps trying.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class PeriodicThread:
    """Calls ``fn`` every ``interval_seconds`` until stopped.

    Example::

        loop = PeriodicThread("lease-heartbeat", 5.0, leases.renew_all)
        loop.start()
        ...
        loop.stop()
    """

    def __init__(self, name: str, interval_seconds: float, fn: Callable[[], object]) -> None:
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be > 0")
        self._name = name
        self._interval = interval_seconds
        self._fn = fn
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Start the loop.

        Raises:
            RuntimeError: already started.
        """
        if self._thread is not None:
            raise RuntimeError(f"{self._name} already running")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"epochgc-{self._name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and wait for the current call to finish; idempotent."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._fn()
            except Exception:
                log.exception("%s: periodic call failed; trying again next interval", self._name)
