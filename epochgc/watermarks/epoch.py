"""Reading the cluster epoch cheaply.

Writers stamp L0 objects with the cluster epoch read through ``EpochCache``
(one LIST per TTL instead of one per write). A stale cached value is
tolerated by the partitions' epoch windows; a writer whose fence is rejected
as stale calls ``invalidate(below=window.previous)`` and reads afresh.

What moves the epoch forward is ``watermarks.ticker``: one ticker per
cluster, so a cached epoch lags by at most one.
"""

from __future__ import annotations

from collections.abc import Callable

from epochgc.runtime import SYSTEM, Runtime


class EpochCache:
    """A TTL cache in front of an epoch source.

    Example::

        cache = EpochCache(controller.current_epoch, ttl_seconds=30)
        epoch = cache.get()

    Args:
        source: reads the current cluster epoch (one LIST).
        ttl_seconds: how long a read value is reused.
        runtime: the monotonic clock and the lock (virtual in tests and
            ``epochgc simulate``).
    """

    def __init__(
        self,
        source: Callable[[], int],
        *,
        ttl_seconds: float = 30.0,
        runtime: Runtime = SYSTEM,
    ) -> None:
        if ttl_seconds < 0:
            raise ValueError("ttl_seconds must be >= 0")
        self._source = source
        self._ttl = ttl_seconds
        self._clock = runtime.monotonic
        self._lock = runtime.lock()
        self._value: int | None = None
        self._read_at = 0.0
        self.refreshes = 0

    def get(self) -> int:
        """The cached epoch, refreshed when older than the TTL."""
        with self._lock:
            if self._value is not None and self._clock() - self._read_at < self._ttl:
                return self._value
        value = self._source()
        with self._lock:
            # Never go backwards, even if a slower refresh finishes last.
            if self._value is None or value >= self._value:
                self._value = value
            self._read_at = self._clock()
            self.refreshes += 1
            return self._value

    def invalidate(self, below: int | None = None) -> None:
        """Drop the cached value (only if it is below ``below``, when given)."""
        with self._lock:
            if self._value is not None and (below is None or self._value < below):
                self._value = None
