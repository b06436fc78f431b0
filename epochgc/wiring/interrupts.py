"""SIGTERM taken as Ctrl-C by a command that owns child processes.

Python's default answer to SIGTERM ends the process at once: no ``finally``
runs, so the children a driver started (``epochgc verify``'s workers, the
benchmark's nodes) run on as orphans, writing to the store. Inside
``sigterm_as_interrupt`` the first SIGTERM raises ``KeyboardInterrupt`` in
the main thread instead, so the driver leaves through the clean-up it runs
on Ctrl-C; later ones are ignored until the block ends, so a second
``kill`` does not cut that clean-up short (SIGKILL still does).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import types
from collections.abc import Iterator


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` while inside (main thread only:
    elsewhere Python cannot set handlers, and this does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: types.FrameType | None) -> None:
        del frame
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the clean-up runs to its end
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
