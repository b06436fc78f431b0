"""Background loops on a worker of the runtime: ``StepLoop`` runs a step
and waits what it asks for (the epoch ticker); ``PeriodicThread`` runs one
function every interval (lease heartbeats, the reconciler's stall
backstop).

A loop waits on a condition of its runtime, so ``stop()`` returns promptly
instead of sleeping out the wait, and so the simulation runs it as a task
on virtual time (production's runtime gives it a daemon thread). An
exception that escapes a step is logged and the loop goes on, because a
periodic duty that dies silently (a heartbeat, the ticker) is worse than
one that keeps trying.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from epochgc.runtime import SYSTEM, Flag, Runtime

log = logging.getLogger(__name__)


class StepLoop:
    """Calls ``step`` on a worker until stopped; each call returns the
    seconds to wait before the next one.

    Example::

        loop = StepLoop("epoch-ticker", ticker.run_once, first_wait=0.0, error_wait=5.0,
                        error_message="epoch ticker step failed; trying again")
        loop.start()
        ...
        loop.stop()

    Args:
        first_wait: the wait before the first call.
        error_wait: the wait after a call that raised.
        error_message: logged, with the traceback, when a call raises.
        logger: where that goes (the caller's, so its name says whose step).
    """

    def __init__(
        self,
        name: str,
        step: Callable[[], float],
        *,
        first_wait: float,
        error_wait: float,
        error_message: str,
        logger: logging.Logger = log,
        runtime: Runtime = SYSTEM,
    ) -> None:
        self._name = name
        self._step = step
        self._first_wait = first_wait
        self._error_wait = error_wait
        self._error_message = error_message
        self._log = logger
        self._runtime = runtime
        self._stop = Flag()
        self._changed = runtime.condition(runtime.lock())
        """Wakes the worker's wait early (``stop``), and ``stop`` once the
        worker has ended."""
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    @property
    def stopping(self) -> bool:
        """``stop`` was called since the last ``start``."""
        return self._stop.is_set()

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
        wait = self._first_wait
        try:
            while True:
                with self._changed:
                    if not stop.is_set() and wait > 0:
                        self._changed.wait(wait)
                    if stop.is_set():
                        return
                try:
                    wait = self._step()
                except Exception:
                    self._log.exception("%s", self._error_message)
                    wait = self._error_wait
        finally:
            with self._changed:
                self._running = False
                self._changed.notify_all()


class PeriodicThread(StepLoop):
    """Calls ``fn`` every ``interval_seconds`` until stopped, the first
    time one interval after ``start``.

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

        def call() -> float:
            fn()
            return interval_seconds

        super().__init__(
            name,
            call,
            first_wait=interval_seconds,
            error_wait=interval_seconds,
            error_message=f"{name}: periodic call failed; trying again next interval",
            runtime=runtime,
        )
