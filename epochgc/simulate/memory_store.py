"""An in-memory ``ObjectStore`` with S3's conditional-write semantics,
exact request counts, and a virtual clock: the state behind ``epochgc
simulate``'s store (``simulate/simulated_store.py`` adds latency and faults in front
of it), and the store of the tests and benchmarks that need no HTTP.

The ownership simulation runs 100 nodes and 10,000 partitions for minutes
of virtual time in seconds of real time: no HTTP, no sleeping. The
semantics are the ones ``storage/object_store.py`` documents and the
embedded S3 shows: ``If-None-Match: *`` on an existing key and ``If-Match``
with a stale ETag answer 412, ``If-Match`` on a missing key answers 404, a
LIST page holds at most 1000 keys in lexicographic order, and the ETag is
the MD5 of the body in quotes (so rewriting equal bytes keeps the ETag,
and a renewal must change the bytes to be seen).

Every request is counted by operation and by key prefix (the first
``prefix_depth`` path segments: ``epochgc/meta/nodes/`` with the default),
which is what the benchmark reports.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Protocol

from epochgc.errors import NotFoundError, PreconditionFailedError
from epochgc.runtime import Runtime
from epochgc.storage.object_store import (
    MAX_KEYS_PER_DELETE,
    DeleteOutcome,
    ObjectInfo,
    PagedStore,
    StoredObject,
)


class VirtualClock:
    """Test helper: a monotonic clock and a wall clock that move only when
    told to (``advance``)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
        self._seconds = 1000.0
        self._origin = self._seconds

    def monotonic(self) -> float:
        return self._seconds

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._seconds - self._origin)

    def runtime(self) -> Runtime:
        """A runtime reading this clock (wall and monotonic)."""
        return Runtime(wall=self.now, monotonic=self.monotonic)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a monotonic clock never goes back")
        self._seconds += seconds


class WallClock(Protocol):
    """What stamps LastModified: a ``VirtualClock``, or a simulation's
    per-caller clock (a write is stamped at its caller's time)."""

    def now(self) -> datetime: ...


class MemoryStore(PagedStore):
    """Test helper: an ``ObjectStore`` held in a dict, with request counts.

    Example::

        store = MemoryStore(clock)
        etag = store.put_if_absent("epochgc/meta/nodes/a", b"{}")
        store.requests[("PutObject", "epochgc/meta/nodes/")]  # 1
    """

    def __init__(
        self,
        clock: WallClock | None = None,
        bucket: str = "memory",
        prefix_depth: int = 3,
        *,
        whole_second_stamps: bool = False,
    ) -> None:
        """``whole_second_stamps``: LastModified truncated to the second, as
        S3 shows it (the lease rules read stamps' differences)."""
        self._bucket = bucket
        self._whole_seconds = whole_second_stamps
        self._clock: WallClock = clock or VirtualClock()
        self._depth = prefix_depth
        self._lock = threading.Lock()
        self._objects: dict[str, StoredObject] = {}
        self._infos: dict[str, ObjectInfo] = {}
        self._keys: list[str] = []
        self._listing: list[ObjectInfo] = []
        """``_infos`` in the order of ``_keys``: a LIST page is one slice."""
        self.requests: Counter[tuple[str, str]] = Counter()
        """(operation, key prefix) -> requests."""

    @property
    def bucket(self) -> str:
        return self._bucket

    # --- accounting ------------------------------------------------------------

    def prefix_of(self, key: str) -> str:
        """The counting prefix of a key: its first ``prefix_depth`` segments."""
        parts = key.split("/")
        return "/".join(parts[: self._depth]) + "/" if len(parts) > self._depth else key

    def _count(self, operation: str, key: str) -> None:
        self.requests[(operation, self.prefix_of(key))] += 1

    def count(self, operation: str | None = None, prefix: str | None = None) -> int:
        """Requests so far, optionally of one operation and/or under one
        counting prefix (a prefix matches every counting prefix below it)."""
        return sum(
            n
            for (op, pre), n in self.requests.items()
            if (operation is None or op == operation) and (prefix is None or pre.startswith(prefix))
        )

    def reset_counts(self) -> None:
        self.requests.clear()

    # --- reads ----------------------------------------------------------------------

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None) -> StoredObject:
        if byte_range is not None and not 0 <= byte_range[0] <= byte_range[1]:
            raise ValueError(f"invalid byte range {byte_range}")
        with self._lock:
            self._count("GetObject", key)
            obj = self._objects.get(key)
        if obj is None:
            raise NotFoundError(f"no such key key={key!r}")
        if byte_range is None:
            return obj
        first, last = byte_range
        return StoredObject(
            key, obj.body[first : last + 1], obj.etag, obj.last_modified, obj.metadata
        )

    def head(self, key: str) -> ObjectInfo:
        with self._lock:
            self._count("HeadObject", key)
            obj = self._objects.get(key)
        if obj is None:
            raise NotFoundError(f"no such key key={key!r}")
        return ObjectInfo(key, len(obj.body), obj.etag, obj.last_modified)

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[list[ObjectInfo]]:
        if not 1 <= page_size <= 1000:
            raise ValueError(f"page_size must be in 1..1000, got {page_size}")
        after = start_after or ""
        while True:
            with self._lock:
                self._count("ListObjectsV2", prefix)
                start = bisect.bisect_right(self._keys, after) if after else 0
                start = max(start, bisect.bisect_left(self._keys, prefix))
                # One slice between bisected bounds, not a scan of every key
                # after ``start``: the ownership simulation lists 100,000
                # records a thousand times a round.
                end = self._prefix_end(prefix, start)
                stop = min(end, start + page_size)
                page = self._listing[start:stop]
                more = stop < end
            if page:
                yield page
            if not more:
                return
            after = page[-1].key

    def _prefix_end(self, prefix: str, start: int) -> int:
        """The index after the last key at or after ``start`` that starts
        with ``prefix``."""
        if not prefix:
            return len(self._keys)
        # Every key starting with ``prefix`` sorts before ``prefix`` with its
        # last character raised by one (and after ``prefix`` itself).
        bound = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return bisect.bisect_left(self._keys, bound, lo=start)

    def list_prefixes(self, prefix: str) -> list[str]:
        with self._lock:
            self._count("ListObjectsV2", prefix)
            found = {
                prefix + key[len(prefix) :].split("/", 1)[0] + "/"
                for key in self._keys
                if key.startswith(prefix) and "/" in key[len(prefix) :]
            }
        return sorted(found)

    # --- writes ------------------------------------------------------------------------

    def _store(self, key: str, body: bytes, metadata: Mapping[str, str] | None) -> str:
        etag = (
            f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"'  # S3's ETag, not security
        )
        stamp = self._clock.now()
        if self._whole_seconds:
            stamp = stamp.replace(microsecond=0)
        stored = StoredObject(key, body, etag, stamp, dict(metadata or {}))
        info = ObjectInfo(key, len(body), etag, stored.last_modified)
        index = bisect.bisect_left(self._keys, key)
        if key in self._objects:
            self._listing[index] = info
        else:
            self._keys.insert(index, key)
            self._listing.insert(index, info)
        self._objects[key] = stored
        self._infos[key] = info
        return etag

    def put(self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None) -> str:
        with self._lock:
            self._count("PutObject", key)
            return self._store(key, body, metadata)

    def put_if_absent(
        self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        with self._lock:
            self._count("PutObject", key)
            if key in self._objects:
                raise PreconditionFailedError(f"412 (If-None-Match *) key={key!r}")
            return self._store(key, body, metadata)

    def put_if_match(
        self, key: str, body: bytes, etag: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        if not etag:
            raise ValueError("put_if_match needs a non-empty etag")
        with self._lock:
            self._count("PutObject", key)
            obj = self._objects.get(key)
            if obj is None:
                raise NotFoundError(f"404 (If-Match {etag}) key={key!r}")
            if obj.etag != etag:
                raise PreconditionFailedError(f"412 (If-Match {etag}) key={key!r}")
            return self._store(key, body, metadata)

    def delete(self, key: str) -> None:
        with self._lock:
            self._count("DeleteObject", key)
            self._remove(key)

    def _remove(self, key: str) -> None:
        if self._objects.pop(key, None) is not None:
            del self._infos[key]
            index = bisect.bisect_left(self._keys, key)
            del self._keys[index]
            del self._listing[index]

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        if len(keys) > MAX_KEYS_PER_DELETE:
            raise ValueError(f"at most {MAX_KEYS_PER_DELETE} keys per batch, got {len(keys)}")
        if not keys:
            return DeleteOutcome((), {}, 0)  # S3ObjectStore sends no request either
        with self._lock:
            self._count("DeleteObjects", keys[0] if keys else "")
            for key in keys:
                self._remove(key)
        return DeleteOutcome(tuple(keys), {}, 1)
