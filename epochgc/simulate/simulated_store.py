"""The simulated S3: one in-memory bucket (``memory_store.MemoryStore``)
behind a network that takes time and fails the way a real store does.

Each process talks to the bucket through its own ``StoreView`` (an
``ObjectStore``), so a fault can hit one process only. A request:

1. is sent at the caller's now, and *lands* (is applied, atomically, at
   the bucket) half a latency later, plus 1 to 4 s when a
   ``late_landing`` fault covers the caller; the latency has a long tail;
2. is answered half a latency after landing; meanwhile every other task
   runs (a peer may judge, take, write);
3. may have failed instead (``brownout``: 503 until the retries run out,
   nothing applied), or had its answer lost (``lost_answers``: applied,
   then the caller sees either ``RetriesExhaustedError`` or, as after a
   retry that found the key changed, a 412);
4. a DeleteObjects may answer a per-key error for some of its keys
   (``key_errors``), which stay in the bucket while the rest go.

A request from a process killed meanwhile still lands: the bucket
scheduled it when it was sent. LastModified is stamped by one of the
store's gateways, each with a clock of its own (a few seconds apart), in
whole seconds, as S3 lists it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from epochgc.errors import (
    PreconditionFailedError,
    RetriesExhaustedError,
    StorageError,
)
from epochgc.simulate.fault_schedule import Fault
from epochgc.simulate.memory_store import MemoryStore
from epochgc.simulate.virtual_time import Process, ProcessKilled, Scheduler
from epochgc.storage.keys import parse_log_entry_key
from epochgc.storage.object_store import (
    DeleteOutcome,
    ObjectInfo,
    PagedStore,
    StoredObject,
)

T = TypeVar("T")

EPOCH_ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
"""Store time at virtual time 0."""

LATE_LANDING_SECONDS = (1.0, 4.0)
"""How late a request under ``late_landing`` reaches the store."""
RETRY_SECONDS = 0.6
"""How long a failing request keeps the caller before its retries run out."""
SLOWDOWN_ATTEMPTS = 4
"""Tries a request makes against a throttled prefix (the first and three
retries, as an S3 client's standard retry mode does) before its retries
run out (``slowdown``)."""
SLOWDOWN_BACKOFF_SECONDS = 0.1
"""The first retry's back-off cap; each retry doubles it (full jitter)."""


class GatewayClocks:
    """The store's gateways: each stamps writes with its own clock."""

    def __init__(self, sched: Scheduler, offsets: list[float], rng: random.Random) -> None:
        self._sched = sched
        self._offsets = offsets
        self._rng = rng

    def now(self) -> datetime:
        """The stamp of a write landing now, at a gateway drawn at random."""
        offset = self._rng.choice(self._offsets)
        return EPOCH_ORIGIN + timedelta(seconds=self._sched.now + offset)


class Network:
    """The bucket, the faults in force, and the trace of every request."""

    def __init__(
        self,
        sched: Scheduler,
        rng: random.Random,
        faults: list[Fault],
        gateways: list[float],
        trace: Callable[[str], None],
    ) -> None:
        self.sched = sched
        self._rng = rng
        self._faults = faults
        self._trace = trace
        self._stalls_done: set[Fault] = set()
        self._buckets: dict[Fault, tuple[float, float]] = {}
        """Each ``slowdown`` fault's tokens, and when they were counted."""
        self.nodes: set[str] = set()
        """The ids of the cluster's nodes (the world adds each as it starts)."""
        self.controller_prefix = ""
        """The controller log's prefix (the world sets it): a write of one
        of its slots from a node is an epoch tick."""
        self.bucket = MemoryStore(
            GatewayClocks(sched, gateways, rng),
            bucket="sim",
            whole_second_stamps=True,
        )
        self.requests = 0
        self.on_landed: Callable[[str, bytes, str], None] = lambda _key, _body, _by: None
        """Called with every write that landed and the process that sent it
        (the ghost state's view)."""
        self.on_deleted: Callable[[tuple[str, ...], str], None] = lambda _keys, _by: None
        """Called with the keys of every deletion that landed and the
        process that sent it."""
        self.on_landing: Callable[[str, object, str, str], None] = lambda _by, _task, _op, _k: None
        """Called as each request reaches the bucket, before it is applied,
        with the process and the task that sent it, the operation and key."""
        self.on_deletion_answer_lost: Callable[[str, tuple[str, ...]], None] = lambda _by, _keys: (
            None
        )
        """Called with the process and the keys a DeleteObjects confirmed
        when its answer was lost on the way back."""
        self.landing_sent = 0.0
        """When the request being applied now was sent (for ``on_landed``)."""

    def _active(self, kind: str, target: str, key: str = "") -> Fault | None:
        """The fault of ``kind`` acting on this request: of those active,
        one limited to a prefix of ``key`` before one on every key."""
        t = self.sched.now
        first = None
        for fault in self._faults:
            if fault.kind == kind and fault.covers(t, target, key):
                if fault.prefix:
                    return fault
                first = first or fault
        return first

    def failing_keys(self, node: str, keys: list[str]) -> set[str]:
        """The keys of a DeleteObjects landing now that fail with a per-key
        error (``key_errors``: S3 answered InternalError for them until the
        client's retries ran out), the rest being deleted."""
        fault = self._active("key_errors", node)
        if fault is None:
            return set()
        return {key for key in keys if self._rng.random() < fault.rate}

    def _stall_before(self, node: str, process: Process, op: str, key: str) -> float:
        """How long ``process`` stops before this request is sent: a
        ``stalled_tick`` fault not yet used stops the first node that
        appends to the controller log (an epoch tick: only a node's ticker
        writes there from a node) at or after the fault's time, a SIGSTOP
        between reading the log's tail and writing the next slot."""
        if (
            op != "PutObject?create"
            or node not in self.nodes
            or parse_log_entry_key(key, self.controller_prefix) is None
        ):
            return 0.0
        due = (
            f
            for f in self._faults
            if f.kind == "stalled_tick" and f.at <= self.sched.now and f not in self._stalls_done
        )
        fault = next(due, None)
        if fault is None:
            return 0.0
        self._stalls_done.add(fault)
        self.sched.pause(process, fault.seconds)
        self._trace(f"{process.name} stopped {fault.seconds:.1f}s before {op} {key}")
        return fault.seconds

    def _throttle(self, node: str, process: Process, op: str, key: str) -> None:
        """``slowdown``: a request over its prefix's rate is answered 503
        SlowDown and retried after a jittered, doubling back-off; once
        ``SLOWDOWN_ATTEMPTS`` tries were all over the rate, its retries ran
        out. A prefix's rate is a token bucket holding a second's worth."""
        for attempt in range(SLOWDOWN_ATTEMPTS):
            fault = self._active("slowdown", node, key)
            if fault is None or self._take_token(fault):
                return
            if attempt + 1 < SLOWDOWN_ATTEMPTS:
                self.sched.sleep(self._rng.uniform(0.0, SLOWDOWN_BACKOFF_SECONDS * 2**attempt))
        self._trace(f"{process.name} {op} {key} -> 503 SlowDown on its prefix (retries ran out)")
        raise RetriesExhaustedError(f"SlowDown: retries ran out key={key!r}", None)

    def _take_token(self, fault: Fault) -> bool:
        now = self.sched.now
        tokens, since = self._buckets.get(fault, (fault.rate, now))
        tokens = min(fault.rate, tokens + (now - since) * fault.rate)
        taken = tokens >= 1.0
        self._buckets[fault] = (tokens - 1.0 if taken else tokens, now)
        return taken

    def latency(self) -> float:
        """One request's round trip: ~15 ms, with a long tail."""
        base = self._rng.lognormvariate(math.log(0.015), 0.5)
        if self._rng.random() < 0.02:
            base *= self._rng.uniform(10, 80)
        return base

    def call(
        self, node: str, process: Process, op: str, key: str, apply: Callable[[], T], *, write: bool
    ) -> T:
        """One request of ``process`` (a process of node ``node``)."""
        if not process.alive:
            raise ProcessKilled(process.name)
        self.requests += 1
        self._throttle(node, process, op, key)  # before it is sent: the retries' back-off
        sent = self.sched.now
        task = self.sched.current
        latency = self.latency()
        brownout = self._active("brownout", node)
        if brownout is not None and self._rng.random() < brownout.rate:
            self.sched.sleep(RETRY_SECONDS)
            self._trace(f"{process.name} {op} {key} -> 503 SlowDown (retries ran out)")
            raise RetriesExhaustedError(f"SlowDown: retries ran out key={key!r}", None)
        extra = self._stall_before(node, process, op, key)
        late = self._active("late_landing", node)
        if late is not None and (write or not late.writes_only):
            extra += late.late_by or self._rng.uniform(*LATE_LANDING_SECONDS)
        lands = sent + latency / 2 + extra
        box: dict[str, object] = {}

        def land() -> None:
            self.on_landing(process.name, task, op, key)
            self.landing_sent = sent
            try:
                box["ok"] = apply()
                outcome = "ok"
            except StorageError as err:
                box["err"] = err
                outcome = type(err).__name__
            self._trace(f"{process.name} {op} {key} landed (sent {sent:.3f}): {outcome}")

        self.sched.at(lands, land)
        self.sched.wait_until(lands + max(latency / 2, 1e-4))
        lossy = self._active("lost_answers", node, key)
        if write and lossy is not None and self._rng.random() < lossy.rate:
            if "ok" in box and op.startswith("PutObject?") and self._rng.random() < lossy.retried:
                self._trace(f"{process.name} {op} {key} answer lost; its retry answered 412")
                raise PreconditionFailedError(f"412 after a retry key={key!r}")
            self._trace(f"{process.name} {op} {key} answer lost")
            answered = box.get("ok")
            if isinstance(answered, DeleteOutcome):
                self.on_deletion_answer_lost(process.name, answered.deleted)
            raise RetriesExhaustedError(f"timed out key={key!r}", None)
        if "err" in box:
            raise box["err"]  # type: ignore[misc]
        return box["ok"]  # type: ignore[return-value]


class StoreView(PagedStore):
    """The bucket as one process sees it: an ``ObjectStore`` whose every
    request goes through the ``Network``."""

    def __init__(self, network: Network, node: str, process: Process) -> None:
        self._net = network
        self._node = node
        self._process = process
        self._bucket = network.bucket

    @property
    def bucket(self) -> str:
        return self._bucket.bucket

    def _call(self, op: str, key: str, apply: Callable[[], T], *, write: bool = False) -> T:
        return self._net.call(self._node, self._process, op, key, apply, write=write)

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None) -> StoredObject:
        return self._call("GetObject", key, lambda: self._bucket.get(key, byte_range=byte_range))

    def head(self, key: str) -> ObjectInfo:
        return self._call("HeadObject", key, lambda: self._bucket.head(key))

    def _write(self, op: str, key: str, body: bytes, apply: Callable[[], str]) -> str:
        def landed() -> str:
            etag = apply()
            self._net.on_landed(key, body, self._process.name)
            return etag

        return self._call(op, key, landed, write=True)

    def put(self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None) -> str:
        return self._write(
            "PutObject", key, body, lambda: self._bucket.put(key, body, metadata=metadata)
        )

    def put_if_absent(
        self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        return self._write(
            "PutObject?create",
            key,
            body,
            lambda: self._bucket.put_if_absent(key, body, metadata=metadata),
        )

    def put_if_match(
        self, key: str, body: bytes, etag: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        return self._write(
            "PutObject?match",
            key,
            body,
            lambda: self._bucket.put_if_match(key, body, etag, metadata=metadata),
        )

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[list[ObjectInfo]]:
        after = start_after
        while True:
            page = self._call(
                "ListObjectsV2",
                prefix,
                lambda a=after: next(  # type: ignore[misc]
                    self._bucket.list_pages(prefix, start_after=a, page_size=page_size), []
                ),
            )
            if page:
                yield page
            if len(page) < page_size:
                return
            after = page[-1].key

    def list_prefixes(self, prefix: str) -> list[str]:
        return self._call("ListObjectsV2", prefix, lambda: self._bucket.list_prefixes(prefix))

    def delete(self, key: str) -> None:
        def landed() -> None:
            self._bucket.delete(key)
            self._net.on_deleted((key,), self._process.name)

        self._call("DeleteObject", key, landed, write=True)

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        def landed() -> DeleteOutcome:
            failing = self._net.failing_keys(self._node, keys)
            kept = [key for key in keys if key not in failing]
            outcome = self._bucket.delete_batch(kept)
            self._net.on_deleted(outcome.deleted, self._process.name)
            failed = {key: "InternalError" for key in keys if key in failing}
            return DeleteOutcome(outcome.deleted, failed, 1)

        return self._call("DeleteObjects", keys[0] if keys else "", landed, write=True)
