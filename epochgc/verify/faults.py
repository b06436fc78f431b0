"""Fault injection between epochgc and the bucket: an ``ObjectStore``
wrapper, driven by a seed, that makes requests fail (as if retries ran
out), answer SlowDown, apply and then lose their answer (unknown outcome),
take longer, and delete only part of a DeleteObjects batch; and, on
demand, slow every write under one prefix (``slow_prefix``) and every read
under another (``slow_read_prefix``), which is how ``epochgc verify`` makes
the reconcilers (their L1 writes and L0 reads) fall behind the producers
without touching anything else.

Used by ``epochgc verify``; never configured in production. Faults can be
switched off at run time (``enabled``) so a run can quiesce on a clean
store and check the end state.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from epochgc.errors import RetriesExhaustedError
from epochgc.events import EventChannel
from epochgc.storage.object_store import (
    DeleteOutcome,
    ObjectInfo,
    ObjectStore,
    PagedStore,
    StoredObject,
    Throttled,
    delete_in_batches,
)

T = TypeVar("T")

KINDS = ("error", "slowdown", "unknown_outcome", "latency", "partial_delete")


@dataclass(frozen=True)
class FaultPlan:
    """Probabilities per request (each drawn independently)."""

    error: float = 0.02
    """Fail before sending, as if every retry had failed (5xx)."""
    slowdown: float = 0.01
    """Answer 503 SlowDown (published as ``Throttled``, as the real store does)."""
    unknown_outcome: float = 0.02
    """Apply the request, then fail: the caller cannot know it landed."""
    latency: float = 0.05
    """Sleep up to ``max_latency_seconds`` first."""
    partial_delete: float = 0.2
    """A DeleteObjects batch deletes only part of its keys."""
    max_latency_seconds: float = 0.2


class FaultyStore(PagedStore):
    """An ``ObjectStore`` that injects faults into another one.

    Args:
        seed: the random sequence of faults (the same seed, the same draws
            for the same sequence of calls).
        before_delete: called with the keys of every delete before it is
            sent (a checker keeps the list of what may have been deleted).
        events: where an injected SlowDown is published as ``Throttled``:
            the channel the wrapped store and the sweeper share.
    """

    def __init__(
        self,
        inner: ObjectStore,
        plan: FaultPlan,
        seed: int,
        *,
        before_delete: Callable[[list[str]], None] | None = None,
        events: EventChannel | None = None,
    ) -> None:
        self._inner = inner
        self._events = events if events is not None else EventChannel()
        self._plan = plan
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._before_delete = before_delete
        self.enabled = True
        self.injected: Counter[str] = Counter()
        self.slow_prefix: str | None = None
        """While set (and faults are enabled), each write of a key under it
        waits ``slow_seconds`` first (counted as ``slow_write``)."""
        self.slow_read_prefix: str | None = None
        """While set (and faults are enabled), each read of a key under it
        waits ``slow_seconds`` before it is sent (counted as ``slow_read``):
        whatever is deleted meanwhile is gone when the read arrives."""
        self.slow_seconds = 2.0
        self.stall: tuple[str, Callable[[str, str], bool]] | None = None
        """While set, ``(mode, applies)``: every call for which ``applies(
        operation, key)`` holds hangs for good (``"hang"``) or raises an
        error no store raises (``"fail"``: ``RuntimeError``, a bug's), so
        that the loop making those calls stops completing rounds or dies
        while the rest of the process (its lease heartbeat) goes on."""

    # --- plumbing ------------------------------------------------------------

    @property
    def bucket(self) -> str:
        return str(self._inner.bucket)

    @property
    def client(self) -> Any:
        return getattr(self._inner, "client", None)

    def _draw(self, probability: float) -> bool:
        if not self.enabled or probability <= 0:
            return False
        with self._lock:
            return self._rng.random() < probability

    def _count(self, kind: str) -> None:
        with self._lock:
            self.injected[kind] += 1

    def _stall(self, operation: str, key: str) -> None:
        stall = self.stall
        if stall is None or not stall[1](operation, key):
            return
        self._count(f"stall_{stall[0]}")
        if stall[0] == "hang":
            threading.Event().wait()
        raise RuntimeError(f"injected bug: {operation} {key}")

    def _call(self, operation: str, key: str, fn: Callable[[], T]) -> T:
        self._stall(operation, key)
        plan = self._plan
        if self._draw(plan.latency):
            self._count("latency")
            with self._lock:
                pause = self._rng.uniform(0, plan.max_latency_seconds)
            time.sleep(pause)
        if self._draw(plan.slowdown):
            self._count("slowdown")
            self._events.publish(Throttled(operation))
            raise RetriesExhaustedError(f"injected SlowDown: {operation} {key}", None)
        if self._draw(plan.error):
            self._count("error")
            raise RetriesExhaustedError(f"injected 503: {operation} {key}", None)
        result = fn()
        if self._draw(plan.unknown_outcome):
            self._count("unknown_outcome")
            raise RetriesExhaustedError(
                f"injected timeout after {operation} {key} was applied", None
            )
        return result

    # --- the ObjectStore protocol -------------------------------------------------

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None) -> StoredObject:
        prefix = self.slow_read_prefix
        if self.enabled and prefix is not None and key.startswith(prefix):
            self._count("slow_read")
            time.sleep(self.slow_seconds)
        return self._call("GetObject", key, lambda: self._inner.get(key, byte_range=byte_range))

    def head(self, key: str) -> ObjectInfo:
        return self._call("HeadObject", key, lambda: self._inner.head(key))

    def _slow_write(self, key: str) -> None:
        prefix = self.slow_prefix
        if self.enabled and prefix is not None and key.startswith(prefix):
            self._count("slow_write")
            time.sleep(self.slow_seconds)

    def put(self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None) -> str:
        self._slow_write(key)
        return self._call("PutObject", key, lambda: self._inner.put(key, body, metadata=metadata))

    def put_if_absent(
        self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        self._slow_write(key)
        return self._call(
            "PutObject", key, lambda: self._inner.put_if_absent(key, body, metadata=metadata)
        )

    def put_if_match(
        self, key: str, body: bytes, etag: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        return self._call(
            "PutObject", key, lambda: self._inner.put_if_match(key, body, etag, metadata=metadata)
        )

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[list[ObjectInfo]]:
        pages = self._inner.list_pages(prefix, start_after=start_after, page_size=page_size)
        while True:
            page = self._call("ListObjectsV2", prefix, lambda: next(pages, None))
            if page is None:
                return
            yield page

    def list_prefixes(self, prefix: str) -> list[str]:
        return self._call("ListObjectsV2", prefix, lambda: self._inner.list_prefixes(prefix))

    def delete(self, key: str) -> None:
        if self._before_delete is not None:
            self._before_delete([key])
        self._call("DeleteObject", key, lambda: self._inner.delete(key))

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        if self._before_delete is not None:
            self._before_delete(list(keys))
        if keys and self._draw(self._plan.partial_delete):
            self._count("partial_delete")
            with self._lock:
                failing = set(self._rng.sample(keys, self._rng.randint(1, len(keys))))
            kept = [k for k in keys if k not in failing]
            done = self._call("DeleteObjects", keys[0], lambda: self._inner.delete_batch(kept))
            return DeleteOutcome(
                done.deleted, {**done.failed, **dict.fromkeys(failing, "InternalError")}, 1
            )
        return self._call(
            "DeleteObjects", keys[0] if keys else "", lambda: self._inner.delete_batch(keys)
        )

    def delete_many(self, keys: Iterable[str]) -> DeleteOutcome:
        return delete_in_batches(keys, self._safe_batch)

    def _safe_batch(self, batch: list[str]) -> DeleteOutcome:
        try:
            return self.delete_batch(batch)
        except RetriesExhaustedError as err:
            return DeleteOutcome((), dict.fromkeys(batch, str(err)), 1)


class HeldWrites:
    """An ``ObjectStore`` whose next create-only write under ``prefix`` is
    held until ``release()``: ``held`` is set once that write is waiting.

    ``epochgc verify``'s second operator writes through it: it has read the
    controller and chosen its slot, and its PUT waits while the first
    operator deletes and recreates the topic, so it lands late, exactly
    the interleaving a lost slot and its back-off give by chance.
    """

    def __init__(self, inner: ObjectStore, prefix: str, *, timeout_seconds: float = 30.0) -> None:
        self._inner = inner
        self._prefix = prefix
        self._timeout = timeout_seconds
        self._armed = False
        self._released = threading.Event()
        self.held = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def bucket(self) -> str:
        return str(self._inner.bucket)

    def arm(self) -> None:
        """Hold the next write under the prefix."""
        self._released.clear()
        self.held.clear()
        self._armed = True

    def release(self) -> None:
        self._released.set()

    def put_if_absent(
        self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        if self._armed and key.startswith(self._prefix):
            self._armed = False
            self.held.set()
            self._released.wait(self._timeout)
        return self._inner.put_if_absent(key, body, metadata=metadata)
