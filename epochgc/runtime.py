"""The one way protocol code reaches what makes a run non-deterministic:
the wall and monotonic clocks, sleeping, locks and conditions, concurrent
requests, background workers, and random ids and jitter.

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

import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Protocol, TypeVar

__all__ = [
    "SYSTEM",
    "Condition",
    "Executor",
    "Flag",
    "Future",
    "Lock",
    "RequestPool",
    "Runtime",
    "StopSignal",
    "new_future",
    "new_random_id",
    "start_daemon",
    "thread_executor",
    "thread_pool",
    "utc_now",
]
"""``Future`` is re-exported: protocol code names futures through here."""

T = TypeVar("T")
A = TypeVar("A")


class _Held(Protocol):
    """Held for a ``with`` block: a lock, or a condition's lock."""

    def __enter__(self) -> bool: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
        /,
    ) -> None: ...


class Lock(_Held, Protocol):
    """A re-entrant lock as protocol code uses it: ``with lock:`` or
    ``lock.acquire(timeout=...)`` then ``lock.release()``."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...

    def release(self) -> None: ...


class Condition(_Held, Protocol):
    """A condition variable over a ``Lock``: ``wait`` releases the lock
    until ``notify_all`` (or the timeout), then takes it again."""

    def wait(self, timeout: float | None = None) -> bool: ...

    def notify_all(self) -> None: ...


class Executor(Protocol):
    """Runs submitted calls on up to a fixed number of workers; each call's
    ``Future`` resolves when it ends. ``shutdown(wait=True)`` waits for
    every submitted call."""

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]: ...

    def shutdown(self, wait: bool = True) -> None: ...


class RequestPool(Protocol):
    """Runs requests side by side: a ``ThreadPoolExecutor``, or the
    simulation's pool that runs them as simulated tasks in virtual time."""

    def map(self, fn: Callable[[Any], T], iterable: Iterable[Any], /) -> Iterator[T]: ...

    def shutdown(self, wait: bool = True) -> None: ...


class StopSignal(Protocol):
    """Set once to ask work to stop; the work reads it between steps and
    never waits on it. A ``threading.Event`` is one; ``Flag`` is the one
    protocol code makes."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...


class Flag:
    """A ``StopSignal`` that is only set and read: no lock and no waiting,
    so it behaves the same on threads and on the simulation's tasks (one
    attribute written once from ``False`` to ``True``)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True


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


def _new_condition(lock: Lock) -> Condition:
    return threading.Condition(lock)  # type: ignore[arg-type]


def thread_executor(workers: int, name: str) -> Executor:
    """A ``ThreadPoolExecutor`` of ``workers`` threads named ``name``."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)


def new_future() -> Future[Any]:
    """A future another worker resolves."""
    return Future()


def start_daemon(name: str, fn: Callable[[], None]) -> None:
    """Run ``fn`` on a daemon thread named ``name``: it never keeps the
    process alive, and whoever waits for it waits on a condition it
    signals, not on the thread."""
    threading.Thread(target=fn, name=name, daemon=True).start()


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
        new_id: a new random id of 32 hex digits (incarnations, and the nonces
            that keep two writers from ever writing equal log entries).
        condition: a condition variable over a lock from ``lock``.
        executor: an executor of ``workers`` named ``name`` whose futures
            other code may wait on (a pipeline of puts).
        future: a new unresolved future (what ``executor`` hands out).
        spawn: start a background worker running ``fn``.
        unit_random: a draw uniform in [0, 1) (retry jitter).
    """

    wall: Callable[[], datetime] = utc_now
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    lock: Callable[[], Lock] = _new_rlock
    request_pool: Callable[[int, str], RequestPool | None] = thread_pool
    new_id: Callable[[], str] = new_random_id
    condition: Callable[[Lock], Condition] = _new_condition
    executor: Callable[[int, str], Executor] = thread_executor
    future: Callable[[], Future[Any]] = new_future
    spawn: Callable[[str, Callable[[], None]], None] = start_daemon
    unit_random: Callable[[], float] = random.random

    def run_requests(
        self, workers: int, name: str, fn: Callable[[A], T], items: Iterable[A]
    ) -> list[T]:
        """``fn`` of every item, up to ``workers`` side by side (one after
        another for one worker), results in order; the first failure is
        raised once every request ended."""
        pool = self.request_pool(workers, name)
        if pool is None:
            return [fn(item) for item in items]
        try:
            return list(pool.map(fn, items))
        finally:
            pool.shutdown()


SYSTEM = Runtime()
"""Production's runtime: the real clocks, threads and random ids."""
