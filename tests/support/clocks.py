"""Test helper: a clock that reads what the test sets, wall or monotonic.

Example::

    clock = SetClock(0.0)       # a monotonic clock at 0 s
    limiter = RateController(20.0, clock=clock)
    clock.at += 1.5
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class SetClock(Generic[T]):
    """Reads ``at``, which only the test moves."""

    def __init__(self, at: T) -> None:
        self.at = at

    def __call__(self) -> T:
        return self.at
