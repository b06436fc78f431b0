"""The one way protocol code reaches what makes a run non-deterministic:
the wall and monotonic clocks, sleeping, locks, concurrent requests and
random ids.

Protocol code (the leases, ownership rounds, and the layers being moved
onto this one by one: ``tests/unit/test_runtime_boundary.py`` lists them)
never calls ``time.monotonic``, ``datetime.now``, ``time.sleep``,
``threading.RLock``, a thread pool or ``uuid`` itself: it is handed a
``Runtime``. Production uses the default one, which is exactly those
calls. ``epochgc simulate`` hands every simulated process a runtime whose
clocks are virtual (with the process's own offset and drift), whose locks
and request pools switch between simulated processes in one thread, and
whose ids come from the seed: so one seed replays a whole run.

A frozen dataclass of callables, not a class hierarchy (the way
s3transfer's ``TimeUtils`` is handed in): a test replaces only the clock it
moves, e.g. ``Runtime(wall=clock.now, monotonic=clock.monotonic)``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Lock(Protocol):
    """A re-entrant lock as protocol code uses it: ``with lock:`` or
    ``lock.acquire(timeout=...)`` then ``lock.release()``."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...

    def release(self) -> None: ...

    def __enter__(self) -> bool: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
        /,
    ) -> None: ...


class RequestPool(Protocol):
    """Runs requests side by side: a ``ThreadPoolExecutor``, or the
    simulation's pool that runs them as simulated tasks in virtual time."""

    def map(self, fn: Callable[[Any], T], iterable: Iterable[Any], /) -> Iterator[T]: ...


def utc_now() -> datetime:
    """The wall clock, aware UTC."""
    return datetime.now(UTC)


def new_random_id() -> str:
    """A random 32-hex-digit id (incarnations, nonces)."""
    return uuid.uuid4().hex


def thread_pool(workers: int, name: str) -> RequestPool | None:
    """A pool of ``workers`` threads named ``name``; ``None`` (run requests
    one after another in the caller) for one worker."""
    if workers <= 1:
        return None
    return ThreadPoolExecutor(workers, thread_name_prefix=name)


def _new_rlock() -> Lock:
    return threading.RLock()


@dataclass(frozen=True)
class Runtime:
    """Clocks, sleeping, locks, request pools and ids for protocol code.

    Example::

        lease = NodeLease(store, "epochgc", "node-1")            # production
        lease = NodeLease(store, "epochgc", "node-1",
                          runtime=Runtime(wall=clock.now, monotonic=clock.monotonic))

    Attributes:
        wall: the wall clock (aware UTC): written into documents for
            people to read; no decision compares it across processes.
        monotonic: seconds on this process's monotonic clock: every timing
            decision.
        sleep: wait this many seconds.
        lock: a new re-entrant lock.
        request_pool: a pool running up to ``workers`` requests side by
            side (``None``: one after another).
        new_id: a new random id.
    """

    wall: Callable[[], datetime] = utc_now
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    lock: Callable[[], Lock] = _new_rlock
    request_pool: Callable[[int, str], RequestPool | None] = thread_pool
    new_id: Callable[[], str] = new_random_id


SYSTEM = Runtime()
"""Production's runtime: the real clocks, threads and random ids."""
