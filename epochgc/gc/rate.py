"""The sweeper's delete rate: AIMD on throttling, an optional hard limit.

S3 scales request rate per prefix and answers 503 SlowDown while it does;
the right response is to halve the rate (multiplicative decrease) and then
creep back up (additive increase), as TCP does. ``RateController`` decides
how long a batch must wait; it never sleeps itself (the caller does).

A hard limit (``gc.rate_limit_keys_per_second``) is a cap on the store, not
on one process: the Spark job gives each task ``task_rate_share`` of it, so
the tasks that run at once together stay under it. Each batch waits until
it is paid for (no free first burst), so k tasks starting together do not
send k bursts above the cap; and a SlowDown never lifts the rate above the
cap (``min_rate`` yields to a lower limit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from epochgc.runtime import SYSTEM


class RateController:
    """A token bucket whose rate (keys/s) halves on throttling.

    Example::

        rate = RateController(limit=None)
        time.sleep(rate.reserve(1000))     # before a DeleteObjects of 1000 keys
        rate.on_throttle()                 # on SlowDown

    Args:
        limit: a hard cap in keys/s, or ``None`` for none (until throttled).
        min_rate: never slower than this.
        increase_per_batch: keys/s added back after each successful batch.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        limit: float | None = None,
        *,
        min_rate: float = 100.0,
        increase_per_batch: float = 100.0,
        clock: Callable[[], float] = SYSTEM.monotonic,
    ) -> None:
        if limit is not None and limit <= 0:
            raise ValueError("limit must be > 0")
        self._limit = limit
        self._min = min_rate if limit is None else min(min_rate, limit)
        self._step = increase_per_batch
        self._clock = clock
        self._lock = threading.Lock()
        self._rate: float | None = limit
        self._next_free = clock()
        self._started = clock()
        self._keys = 0
        self.throttles = 0

    @property
    def rate(self) -> float | None:
        """Current keys/s, or ``None`` when unlimited."""
        with self._lock:
            return self._rate

    def reserve(self, keys: int) -> float:
        """Reserve ``keys`` deletions; return the seconds to wait before
        sending them (until they are paid for at the current rate)."""
        with self._lock:
            now = self._clock()
            self._keys += keys
            if self._rate is None:
                return 0.0
            self._next_free = max(now, self._next_free) + keys / self._rate
            return self._next_free - now

    def on_throttle(self) -> None:
        """Multiplicative decrease."""
        with self._lock:
            self.throttles += 1
            if self._rate is None:
                elapsed = max(self._clock() - self._started, 1e-3)
                observed = self._keys / elapsed
                self._rate = max(self._min, observed / 2)
            else:
                self._rate = max(self._min, self._rate / 2)

    def on_success(self) -> None:
        """Additive increase, up to the hard limit if there is one."""
        with self._lock:
            if self._rate is None:
                return
            raised = self._rate + self._step
            self._rate = raised if self._limit is None else min(raised, self._limit)


def task_rate_share(limit: float, tasks: int, slots: int) -> float | None:
    """Each task's part of a cluster-wide ``limit`` (keys/s), or ``None``
    for no limit (``limit <= 0``). Pure.

    At most ``min(tasks, slots)`` tasks run at once (``slots``: the task
    slots of the cluster, Spark's default parallelism), so that many shares
    add up to the limit. A task that starts after another finished takes
    over its share, never adds to it. Fewer slots than reported (dynamic
    allocation growing later) only makes the job slower than the limit.
    """
    if limit <= 0:
        return None
    return limit / max(1, min(tasks, slots))
