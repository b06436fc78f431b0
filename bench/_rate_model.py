"""Benchmark helper (not product code): S3's per-prefix request-rate limits
and per-request latency, on a simulation's virtual clock.

``bench_ownership`` runs a thousand nodes' real ownership code on the
in-memory store in virtual time. That store answers every request at once
and never says SlowDown, so on its own it cannot tell whether a cluster
would stay within what S3 serves. ``RateLimitedStore`` wraps any
``ObjectStore`` (the simulation's ``MemoryStore``) and models two things:

**Request rates per prefix.** S3 serves at least 3,500 PUT/COPY/POST/DELETE
and 5,500 GET/HEAD requests per second per partitioned prefix, and answers
503 SlowDown beyond that. S3 partitions prefixes by load, on its own, over
minutes; the model takes the simplest fixed reading instead:

* every request is attributed to one prefix: an object request (GET, HEAD,
  PUT of any kind, DELETE) to its key up to and including the last ``/``
  (``epochgc/meta/owners/topic-03/7/12`` -> ``epochgc/meta/owners/topic-03/7/``);
  a LIST to the ``prefix`` argument it was sent with (one request per
  page), whatever keys it returns;
* reads are GET, HEAD and LIST (``READ_LIMIT``, 5,500 per second); writes are
  PUT (plain, create-only and compare-and-swap), DELETE and DeleteObjects
  (``WRITE_LIMIT``, 3,500 per second). A DeleteObjects request counts one
  write per key, against each key's prefix: the conservative reading of a
  batch (epochgc's ownership code sends none);
* requests are counted per prefix and kind in windows of one second of
  virtual time (``floor(t - origin)``, ``t`` the moment the request is
  sent); a request that finds its window full is answered SlowDown (the
  503 is counted in the window too, as a request S3 received, but takes
  no capacity);
* what the caller sees is what ``S3ObjectStore`` does with a SlowDown: it
  retries within its ``RetryPolicy`` (6 attempts, full-jitter backoff from
  50 ms), each attempt a request of its own in whatever window it then
  falls in, and raises ``RetriesExhaustedError`` (a
  ``TransientStorageError``) when the attempts run out. The ownership code
  sees exactly that error from the ``ObjectStore`` interface (it skips the
  round). A DeleteObjects batch refused that often reports every key failed
  with code ``SlowDown``, as ``S3ObjectStore.delete_batch`` does (which
  then retries those keys once more: a second layer the model leaves out).

**Latency.** Every request attempt takes ``latency_seconds`` of the
caller's virtual time, and a backoff waits its delay. ``Timelines`` keeps
one clock per caller (a *lane*: a node's ownership rounds, its lease
heartbeat): while a lane acts, its time starts at the simulation clock and
moves on by each request's latency, so a node's sequential requests are
spread over the time they would take against S3, are counted in the
windows they would fall in, and the node's own code (lease validity,
liveness judgements) reads that time. Requests a caller sends side by
side (the ownership round's writes, up to 8 at once) run in lanes of their
own (``LaneExecutor``), and the caller waits for the last. The simulation
runs one lane at a time; a step's effects are visible to the others from
its start (a simplification of requests that, in reality, land over the
step's duration).

The model leaves out: S3 splitting a hot prefix in two after a while
(raising the limits), requests of other tenants on the bucket, and
latency's spread (every request takes the same time).

Example::

    lanes = Timelines(clock)
    store = RateLimitedStore(MemoryStore(clock), lanes, latency_seconds=0.02)
    with lanes.acting("node-001"):
        store.get("epochgc/meta/nodes/node-002")   # 20 ms of node-001's time
    store.model.peak("read")                       # ("epochgc/meta/nodes/", 1)
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from epochgc.errors import NotFoundError, RetriesExhaustedError, TransientStorageError
from epochgc.storage.object_store import (
    MAX_KEYS_PER_DELETE,
    DeleteOutcome,
    ObjectInfo,
    ObjectStore,
    PagedStore,
    StoredObject,
)
from epochgc.storage.retry import RetryPolicy
from tests.support.wrapping import StoreWrapper

T = TypeVar("T")
R = TypeVar("R")

READ_LIMIT = 5_500
"""GET/HEAD (and LIST) requests per second per prefix S3 serves."""
WRITE_LIMIT = 3_500
"""PUT/COPY/POST/DELETE requests per second per prefix S3 serves."""

READ, WRITE = "read", "write"
KIND = {
    "GetObject": READ,
    "HeadObject": READ,
    "ListObjectsV2": READ,
    "PutObject": WRITE,
    "DeleteObject": WRITE,
    "DeleteObjects": WRITE,
}
"""Operation -> the limit it counts against."""


def key_prefix(key: str) -> str:
    """The prefix an object request counts against: the key up to and
    including its last ``/`` (empty for a key without one)."""
    return key[: key.rfind("/") + 1]


class Clock(Protocol):
    """The simulation clock (``epochgc/simulate/memory_store.VirtualClock``)."""

    def monotonic(self) -> float: ...

    def now(self) -> datetime: ...


class Timelines:
    """One virtual clock per caller, for request latency.

    A *lane* is a caller whose requests go one after another (a node's
    ownership rounds; its lease heartbeat, a thread of its own, is another
    lane). While a lane acts (``acting``), ``monotonic`` and ``now`` are its
    time: the simulation clock when it started acting, or later if its
    previous requests ran past that, plus what its requests spent since
    (``spend``). Outside ``acting`` they are the simulation clock's.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._cursor: dict[str, float] = {}
        self.current: str | None = None

    @contextmanager
    def acting(self, lane: str, at: float | None = None) -> Iterator[None]:
        """Run the block as ``lane``: its requests spend its time, which
        starts no earlier than ``at`` (default: the simulation clock)."""
        previous = self.current
        start = self.clock.monotonic() if at is None else max(at, self.clock.monotonic())
        self._cursor[lane] = max(self._cursor.get(lane, -math.inf), start)
        self.current = lane
        try:
            yield
        finally:
            self.current = previous

    def monotonic(self) -> float:
        """The acting lane's time (the simulation clock outside ``acting``)."""
        lane = self.current
        base = self.clock.monotonic()
        return base if lane is None else max(base, self._cursor[lane])

    def now(self) -> datetime:
        """Wall time at ``monotonic()``."""
        return self.clock.now() + timedelta(seconds=self.monotonic() - self.clock.monotonic())

    def spend(self, seconds: float) -> None:
        """The acting lane's time moves on by ``seconds`` (no lane: nothing)."""
        lane = self.current
        if lane is not None:
            self._cursor[lane] = self.monotonic() + seconds

    def wait_until(self, t: float) -> None:
        """The acting lane waits for time ``t`` (e.g. for other lanes it
        started to finish)."""
        lane = self.current
        if lane is not None:
            self._cursor[lane] = max(self.monotonic(), t)

    def lane_time(self, lane: str) -> float:
        """Where ``lane``'s time is (at least the simulation clock)."""
        return max(self.clock.monotonic(), self._cursor.get(lane, -math.inf))


class LaneExecutor:
    """Stands in for a ``ThreadPoolExecutor`` of ``workers`` threads in
    virtual time: ``map`` runs the calls one after another, each in one of
    ``workers`` lanes of its own (the lane free first, as the pool's idle
    thread takes the next task), all starting at the caller's time; the
    caller then waits until the last one ended. So eight writes that a
    node sends at once take one latency of its time, not eight."""

    def __init__(self, timelines: Timelines, name: str, workers: int) -> None:
        self.timelines = timelines
        self.name = name
        self.workers = workers

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        lanes = self.timelines
        start = lanes.monotonic()
        free = [start] * self.workers
        results = []
        for item in items:
            worker = min(range(self.workers), key=free.__getitem__)
            with lanes.acting(f"{self.name}/worker-{worker}", at=free[worker]):
                results.append(fn(item))
                free[worker] = lanes.monotonic()
        lanes.wait_until(max(free))
        return iter(results)


@dataclass(frozen=True)
class Peak:
    """The busiest one-second window of one prefix and kind."""

    prefix: str
    kind: str
    requests: int
    window: int
    """Seconds since the model's origin at the window's start."""


class RateModel:
    """Per-prefix request counts in one-second windows, and the limits.

    ``offered`` counts every request S3 received (answered or SlowDown);
    ``admitted`` the ones it served, which is what the limit applies to.
    """

    def __init__(
        self, origin: float = 0.0, read_limit: int = READ_LIMIT, write_limit: int = WRITE_LIMIT
    ) -> None:
        self.origin = origin
        self.limits = {READ: read_limit, WRITE: write_limit}
        self.offered: defaultdict[tuple[str, str], Counter[int]] = defaultdict(Counter)
        self.admitted: defaultdict[tuple[str, str], Counter[int]] = defaultdict(Counter)

    def window(self, t: float) -> int:
        """The one-second window of monotonic time ``t``."""
        return math.floor(t - self.origin)

    def offer(self, kind: str, prefixes: Mapping[str, int], t: float) -> bool:
        """A request sent at ``t`` counting ``prefixes[p]`` times against
        each prefix ``p`` (once for every request but a DeleteObjects):
        ``True`` when every prefix's window has room for it, else SlowDown."""
        window = self.window(t)
        limit = self.limits[kind]
        admitted = all(
            self.admitted[(prefix, kind)][window] + n <= limit for prefix, n in prefixes.items()
        )
        for prefix, n in prefixes.items():
            self.offered[(prefix, kind)][window] += n
            if admitted:
                self.admitted[(prefix, kind)][window] += n
        return admitted

    def peaks(
        self, kind: str | None = None, since: float = -math.inf, until: float = math.inf
    ) -> list[Peak]:
        """Every prefix's busiest window of requests received (``kind``: one
        kind only), over the windows that start in ``[since, until)``
        (monotonic times), busiest first."""
        first = -math.inf if math.isinf(since) else self.window(since)
        last = math.inf if math.isinf(until) else self.window(until)
        found = []
        for (prefix, of_kind), windows in self.offered.items():
            if kind is not None and of_kind != kind:
                continue
            inside = [(n, w) for w, n in windows.items() if first <= w < last]
            if inside:
                n, w = max(inside)
                found.append(Peak(prefix, of_kind, n, w))
        return sorted(found, key=lambda p: (-p.requests, p.prefix, p.kind))

    def peak(self, kind: str, since: float = -math.inf, until: float = math.inf) -> Peak | None:
        """The busiest prefix's busiest window of ``kind``, or ``None``."""
        found = self.peaks(kind, since, until)
        return found[0] if found else None


class SlowDownAnswer(TransientStorageError):
    """One 503 SlowDown the model answered (the ``last_error`` of the
    ``RetriesExhaustedError`` raised when the attempts ran out)."""


Snapshot = tuple[Counter[tuple[str, str]], Counter[tuple[str, str]], Counter[tuple[str, str]]]


class RateLimitedStore(PagedStore, StoreWrapper):
    """An ``ObjectStore`` answering SlowDown beyond S3's per-prefix rates,
    with each request taking ``latency_seconds`` of the caller's lane (see
    the module docstring for the model).

    Reads are served by the wrapped store first and then counted (a read
    changes nothing, and the simulation runs one request at a time, so the
    answer is the same): that is how a LIST's pages are counted exactly,
    one request per page and one for an empty listing, without knowing in
    advance whether the wrapped store's listing will ask for another page.
    Writes are counted first and sent only if admitted.

    Attributes:
        requests: ``(operation, prefix)`` -> attempts S3 received.
        slowdowns: ``(operation, prefix)`` -> attempts answered SlowDown.
        failed: ``(operation, prefix)`` -> calls that raised (or, for
            DeleteObjects, failed every key) after the last attempt.
    """

    def __init__(
        self,
        store: ObjectStore,
        timelines: Timelines,
        model: RateModel | None = None,
        *,
        latency_seconds: float = 0.0,
        retry: RetryPolicy | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(store)
        self._inner = store
        self.timelines = timelines
        self.model = model or RateModel(origin=timelines.clock.monotonic())
        self.latency_seconds = latency_seconds
        self.retry = retry or RetryPolicy()
        self._random = random.Random(seed)
        self.requests: Counter[tuple[str, str]] = Counter()
        self.slowdowns: Counter[tuple[str, str]] = Counter()
        self.failed: Counter[tuple[str, str]] = Counter()

    # --- accounting ------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Copies of ``requests``, ``slowdowns`` and ``failed``, to subtract
        from later ones (``since``)."""
        return Counter(self.requests), Counter(self.slowdowns), Counter(self.failed)

    def since(self, before: Snapshot) -> Snapshot:
        """What was counted after ``before`` was taken."""
        now = self.snapshot()
        return now[0] - before[0], now[1] - before[1], now[2] - before[2]

    def _send(self, operation: str, prefix: str, prefixes: Mapping[str, int] | None = None) -> None:
        """One request as ``S3ObjectStore`` sends it: attempts until one is
        admitted, each taking the latency, with the policy's backoff in
        between.

        Raises:
            RetriesExhaustedError: every attempt was answered SlowDown.
        """
        kind = KIND[operation]
        counted = prefixes if prefixes is not None else {prefix: 1}
        attempt = 0
        while True:
            attempt += 1
            sent_at = self.timelines.monotonic()
            admitted = self.model.offer(kind, counted, sent_at)
            self.requests[(operation, prefix)] += 1
            self.timelines.spend(self.latency_seconds)
            if admitted:
                return
            self.slowdowns[(operation, prefix)] += 1
            if not self.retry.can_retry(attempt):
                self.failed[(operation, prefix)] += 1
                last = SlowDownAnswer(
                    f"503 SlowDown (modelled: over {self.model.limits[kind]} {kind}s/s on "
                    f"{prefix!r})"
                )
                raise RetriesExhaustedError(
                    f"{operation} failed after {attempt} attempts prefix={prefix!r}: {last}", last
                )
            self.timelines.spend(self.retry.backoff_seconds(attempt, self._random.random()))

    # --- reads: served, then counted --------------------------------------------------

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None) -> StoredObject:
        try:
            found = self._inner.get(key, byte_range=byte_range)
        except NotFoundError:
            self._send("GetObject", key_prefix(key))
            raise
        self._send("GetObject", key_prefix(key))
        return found

    def head(self, key: str) -> ObjectInfo:
        try:
            found = self._inner.head(key)
        except NotFoundError:
            self._send("HeadObject", key_prefix(key))
            raise
        self._send("HeadObject", key_prefix(key))
        return found

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[list[ObjectInfo]]:
        pages = self._inner.list_pages(prefix, start_after=start_after, page_size=page_size)
        served = 0
        for page in pages:
            self._send("ListObjectsV2", prefix)
            served += 1
            yield page
        if not served:
            self._send("ListObjectsV2", prefix)  # an empty listing is one request too

    def list_prefixes(self, prefix: str) -> list[str]:
        found = self._inner.list_prefixes(prefix)
        self._send("ListObjectsV2", prefix)
        return found

    # --- writes: counted, then sent -----------------------------------------------------

    def put(self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None) -> str:
        self._send("PutObject", key_prefix(key))
        return self._inner.put(key, body, metadata=metadata)

    def put_if_absent(
        self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        self._send("PutObject", key_prefix(key))
        return self._inner.put_if_absent(key, body, metadata=metadata)

    def put_if_match(
        self, key: str, body: bytes, etag: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        self._send("PutObject", key_prefix(key))
        return self._inner.put_if_match(key, body, etag, metadata=metadata)

    def delete(self, key: str) -> None:
        self._send("DeleteObject", key_prefix(key))
        self._inner.delete(key)

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        if len(keys) > MAX_KEYS_PER_DELETE:
            raise ValueError(f"at most {MAX_KEYS_PER_DELETE} keys per batch, got {len(keys)}")
        if not keys:
            return DeleteOutcome((), {}, 0)
        per_prefix = Counter(key_prefix(k) for k in keys)
        try:
            self._send("DeleteObjects", key_prefix(keys[0]), per_prefix)
        except RetriesExhaustedError:
            return DeleteOutcome((), dict.fromkeys(keys, "SlowDown"), 1)
        return self._inner.delete_batch(keys)
