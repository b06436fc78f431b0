"""Waiting in tests for something another thread or process brings about."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    condition: Callable[[], bool], timeout: float = 15.0, what: str = "", poll: float = 0.05
) -> None:
    """Return once ``condition()`` holds; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what or condition}")
