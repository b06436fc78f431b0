"""Where a ``gc spark`` run's time went, phase by phase (packaging, Spark's
start, ``M``, the plan, the Spark jobs, the summary, Spark's stop).

Why: a first run on a cluster took 92 s to delete 6 objects, and nothing
said that 24 s of it was building the executors' environment; the
breakdown lets an operator see which part to fix (a cold package cache,
a slow cluster start, the executors' first fetch of the environment).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class PhaseTimes:
    """Seconds per named phase in the order they first ran, each with an
    optional note saying what it did.

    Example::

        times = PhaseTimes()
        with times.phase("spark_start"):
            spark = build_spark_session(...)
        times.note("spark_start", "local[2]")
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._began = clock()
        self.seconds: dict[str, float] = {}
        self.notes: dict[str, str] = {}

    @contextmanager
    def phase(self, name: str, note: str = "") -> Iterator[None]:
        """Add the block's duration to ``name`` (also when it raises)."""
        start = self._clock()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + self._clock() - start
            if note:
                self.notes[name] = note

    def note(self, name: str, text: str) -> None:
        """Say what phase ``name`` did (shown beside its time)."""
        self.notes[name] = text

    def total(self) -> float:
        """Seconds since this object was made."""
        return self._clock() - self._began

    def as_json(self) -> dict[str, float]:
        """Every phase and ``total``, in seconds (milliseconds precision)."""
        phases = {name: round(seconds, 3) for name, seconds in self.seconds.items()}
        return {**phases, "total": round(self.total(), 3)}

    def line(self) -> str:
        """``time: package 0.4s (environment reused from the cache), ...;
        total 9.8s``: the human output's last line (``demo``'s style)."""
        parts = [
            f"{name.replace('_', ' ')} {seconds:.1f}s"
            + (f" ({self.notes[name]})" if self.notes.get(name) else "")
            for name, seconds in self.seconds.items()
        ]
        return f"time: {', '.join(parts)}; total {self.total():.1f}s"
