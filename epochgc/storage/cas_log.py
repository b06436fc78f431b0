"""A conditional-append log on object storage (docs/architecture.md,
"The bucket as a database").

Entry ``n`` is the object ``{prefix}{n:020d}``, written create-only
(``If-None-Match: *``), so exactly one writer wins each slot; zero padding
makes LIST order numeric order. A snapshot object next to the log (replaced
by CAS, ``If-Match: <etag>``) records in its user metadata the highest offset
it covers, and allows deleting entries below it.

This module knows bytes and offsets only; what an entry means lives with its
domain (``watermarks``). Conditional headers relied on: ``If-None-Match: *``
on PUT (create-only) and ``If-Match: <etag>`` on PUT (compare-and-swap);
``epochgc check-store`` verifies both before anything runs.

Invariants:

* An entry, once written, never changes.
* Truncation never deletes an entry above the snapshot's covered offset, and
  never the newest entry, so LIST always finds the tail.
* A truncated slot is free again: a create-only PUT whose slot was chosen
  before the truncation (a stale tail, a paused process, a slow request)
  lands there, at or below the snapshot's covered offset, where the entry
  it replaces is known only to the snapshot. Such late writes are the only
  entries a snapshot can cover that it did not fold, so a reader trusts
  entries only when the snapshot, read after them, does not cover them
  (``snapshot_etag`` tells cheaply whether it changed); a writer that must
  know its entry counts checks it against the view.
* A writer that loses a slot to identical bytes counts it as its own: after
  an unknown outcome (a timeout) the retry finds its own write. Payloads
  that must not be confused with another writer's carry a writer-unique
  field.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from epochgc.errors import (
    ConflictError,
    InvariantViolation,
    NotFoundError,
    PreconditionFailedError,
    RetriesExhaustedError,
)
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.keys import encode_log_entry_key, parse_log_entry_key
from epochgc.storage.object_store import ObjectStore, get_or_none, head_or_none
from epochgc.storage.retry import RetryPolicy

log = logging.getLogger(__name__)

COVERED_OFFSET_METADATA = "epochgc-covered-offset"


@dataclass(frozen=True)
class LogEntry:
    """One immutable entry of a log."""

    offset: int
    payload: bytes


@dataclass(frozen=True)
class LogRead:
    """The contiguous entries read from an offset.

    ``hole`` is the first missing offset when entries exist above it: a
    pipelined writer whose head write has not landed (yet, or ever), or,
    when it equals the offset the read started at, entries truncated after a
    newer snapshot was written (re-read the snapshot).
    """

    entries: tuple[LogEntry, ...]
    hole: int | None

    @property
    def next_offset(self) -> int | None:
        """The offset after the last contiguous entry, or ``None`` if none."""
        return self.entries[-1].offset + 1 if self.entries else None


@dataclass(frozen=True)
class LogSnapshot:
    """A snapshot object: opaque payload, its etag (for CAS) and the highest
    log offset folded into it."""

    payload: bytes
    etag: str
    covered_offset: int


class ConditionalAppendLog:
    """Append, read, snapshot and truncate one log.

    Example::

        log = ConditionalAppendLog(store, "epochgc/meta/controller/", first_offset=1)
        offset = log.append(b'{"v": 1, "type": "epoch_tick"}')

    Args:
        store: where the log lives.
        prefix: the log's key prefix, ending with ``/``.
        first_offset: offset of the first entry (the controller log starts
            at 1, partition logs at 0).
        snapshot_key: key of the snapshot object, or ``None`` if this log has
            no snapshot (then it is never truncated).
        append_policy: bounds the lost-race loop of ``append`` (full jitter:
            the contenders are uncoordinated processes).
        read_concurrency: parallel GETs when reading many entries.
        runtime: the lock, the back-off's sleep and jitter, and the read
            pool (virtual in ``epochgc simulate``).
    """

    def __init__(
        self,
        store: ObjectStore,
        prefix: str,
        *,
        first_offset: int = 0,
        snapshot_key: str | None = None,
        append_policy: RetryPolicy | None = None,
        read_concurrency: int = 8,
        runtime: Runtime = SYSTEM,
    ) -> None:
        if not prefix.endswith("/"):
            raise ValueError(f"log prefix must end with '/', got {prefix!r}")
        if first_offset < 0:
            raise ValueError("first_offset must be >= 0")
        self._store = store
        self._prefix = prefix
        self._first_offset = first_offset
        self._snapshot_key = snapshot_key
        self._append_policy = append_policy or RetryPolicy(
            max_attempts=32, base_delay_seconds=0.01, max_delay_seconds=1.0
        )
        self._read_concurrency = max(1, read_concurrency)
        self._runtime = runtime
        self._lock = runtime.lock()
        self._known_tail: int | None = None

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def first_offset(self) -> int:
        return self._first_offset

    def key_of(self, offset: int) -> str:
        """The object key of entry ``offset``."""
        return encode_log_entry_key(self._prefix, offset)

    # --- tail -------------------------------------------------------------

    def tail(self, *, refresh: bool = True) -> int:
        """The highest offset present (``first_offset - 1`` for an empty log).

        With ``refresh`` it lists from the last tail this object knew, which
        costs one LIST page in the common case.
        """
        with self._lock:
            known = self._known_tail
        if known is not None and not refresh:
            return known
        start_after = self.key_of(known) if known is not None and known >= 0 else None
        newest = known if known is not None else self._first_offset - 1
        for info in self._store.list_objects(self._prefix, start_after=start_after):
            offset = parse_log_entry_key(info.key, self._prefix)
            if offset is not None and offset > newest:
                newest = offset
        self._observe_tail(newest)
        return newest

    def _observe_tail(self, offset: int) -> None:
        with self._lock:
            if self._known_tail is None or offset > self._known_tail:
                self._known_tail = offset

    # --- append -----------------------------------------------------------

    def append_at(self, offset: int, payload: bytes) -> bool:
        """Try to write ``payload`` at ``offset``.

        Returns:
            True if the slot now holds our payload (a fresh write, or our own
            earlier write found after an unknown outcome); False if another
            writer holds the slot.

        Raises:
            RetriesExhaustedError: the store kept failing.
        """
        if offset < self._first_offset:
            raise ValueError(f"offset {offset} below first_offset {self._first_offset}")
        key = self.key_of(offset)
        for _ in range(3):
            try:
                self._store.put_if_absent(key, payload)
            except PreconditionFailedError:
                pass
            except ConflictError:
                # A concurrent conditional write on this slot: whoever won,
                # the slot's content decides; read it below.
                pass
            else:
                self._observe_tail(offset)
                return True
            try:
                existing = self._store.get(key).body
            except NotFoundError:
                continue  # 409 and the other writer failed: try the slot again
            self._observe_tail(offset)
            return existing == payload
        raise RetriesExhaustedError(f"slot {key!r} stayed contested", None)

    def append(self, payload: bytes, *, before_each: Callable[[], None] | None = None) -> int:
        """Append at the next free slot, re-reading the tail after every lost
        race; return the offset written. ``before_each`` is called right
        before every attempt and may raise to stop: a writer whose right to
        write can run out while it retries (the epoch ticker's role).

        Raises:
            RetriesExhaustedError: lost the race more times than the policy allows.
        """
        attempt = 0
        offset = self.tail(refresh=self._known_tail is None) + 1
        while True:
            attempt += 1
            if before_each is not None:
                before_each()
            if self.append_at(offset, payload):
                return offset
            if not self._append_policy.can_retry(attempt):
                raise RetriesExhaustedError(
                    f"append to {self._prefix!r} lost {attempt} races in a row", None
                )
            jitter = self._runtime.unit_random()
            self._runtime.sleep(self._append_policy.backoff_seconds(attempt, jitter))
            offset = max(offset, self.tail()) + 1

    # --- read -------------------------------------------------------------

    def read(self, from_offset: int, *, limit: int | None = None) -> LogRead:
        """Read the contiguous entries from ``from_offset`` (LIST + parallel GETs).

        Stops before the first missing offset (reported as ``hole`` when
        entries exist above it) and after ``limit`` entries.

        Raises:
            CorruptLogError: never; entries are opaque here.
        """
        from_offset = max(from_offset, self._first_offset)
        start_after = self.key_of(from_offset - 1) if from_offset > 0 else None
        offsets: list[int] = []
        hole: int | None = None
        expected = from_offset
        for info in self._store.list_objects(self._prefix, start_after=start_after):
            offset = parse_log_entry_key(info.key, self._prefix)
            if offset is None:
                continue
            self._observe_tail(offset)
            if offset != expected:
                hole = expected
                break
            if limit is not None and len(offsets) >= limit:
                break
            offsets.append(offset)
            expected += 1
        entries = self._get_many(offsets)
        return LogRead(tuple(entries), hole)

    def _get_many(self, offsets: list[int]) -> list[LogEntry]:
        def fetch(offset: int) -> LogEntry:
            return LogEntry(offset, self._store.get(self.key_of(offset)).body)

        if len(offsets) <= 1 or self._read_concurrency == 1:
            return [fetch(o) for o in offsets]
        return self._runtime.run_requests(
            min(self._read_concurrency, len(offsets)), "epochgc-log-read", fetch, offsets
        )

    # --- snapshot and truncation -------------------------------------------

    def read_snapshot(self) -> LogSnapshot | None:
        """The current snapshot, or ``None`` if none was written.

        Raises:
            InvariantViolation: the snapshot lacks its covered-offset metadata.
        """
        if self._snapshot_key is None:
            return None
        stored = get_or_none(self._store, self._snapshot_key)
        if stored is None:
            return None
        covered_text = stored.metadata.get(COVERED_OFFSET_METADATA)
        if covered_text is None or not covered_text.lstrip("-").isdigit():
            raise InvariantViolation(
                f"snapshot {self._snapshot_key!r} lacks a valid {COVERED_OFFSET_METADATA} "
                f"metadata value (got {covered_text!r})"
            )
        return LogSnapshot(stored.body, stored.etag, int(covered_text))

    def snapshot_etag(self) -> str | None:
        """The snapshot's current etag (one HEAD, no body), or ``None`` if
        none was written: whether it changed since a reader last read it.
        """
        if self._snapshot_key is None:
            return None
        info = head_or_none(self._store, self._snapshot_key)
        return None if info is None else info.etag

    def write_snapshot(
        self, payload: bytes, covered_offset: int, previous: LogSnapshot | None
    ) -> LogSnapshot:
        """Replace the snapshot by CAS against ``previous`` (create-only when
        ``previous`` is ``None``).

        Raises:
            InvariantViolation: the new snapshot covers less than ``previous``
                (a snapshot that moved backwards would let a reader skip
                entries that truncation already removed).
            PreconditionFailedError: someone else replaced the snapshot first.
        """
        if self._snapshot_key is None:
            raise ValueError("this log has no snapshot key")
        if previous is not None and covered_offset < previous.covered_offset:
            raise InvariantViolation(
                f"snapshot would move backwards: covered_offset={covered_offset} "
                f"< previous={previous.covered_offset}"
            )
        metadata = {COVERED_OFFSET_METADATA: str(covered_offset)}
        if previous is None:
            etag = self._store.put_if_absent(self._snapshot_key, payload, metadata=metadata)
        else:
            etag = self._store.put_if_match(
                self._snapshot_key, payload, previous.etag, metadata=metadata
            )
        return LogSnapshot(payload, etag, covered_offset)

    def truncate(self, below_offset: int) -> int:
        """Delete entries below ``below_offset`` that the snapshot covers,
        keeping the newest entry; return how many were deleted.

        Deletes page by page as it lists (one DeleteObjects of at most 1000
        keys per LIST page), so memory stays bounded however long the log
        grew before its first truncation.

        Raises:
            DeleteFailedError: some entries could not be deleted (those of
                earlier pages are gone; a later truncation finishes).
        """
        snapshot = self.read_snapshot()
        if snapshot is None:
            return 0
        limit = min(below_offset, snapshot.covered_offset + 1, self.tail())
        deleted = 0
        for page in self._store.list_pages(self._prefix):
            victims: list[str] = []
            done = False
            for info in page:
                offset = parse_log_entry_key(info.key, self._prefix)
                if offset is None:
                    continue
                if offset >= limit:
                    done = True
                    break
                victims.append(info.key)
            if victims:
                outcome = self._store.delete_many(victims)
                outcome.raise_for_failures()
                deleted += len(outcome.deleted)
            if done:
                break
        log.debug("truncated %d entries of %s below %d", deleted, self._prefix, limit)
        return deleted
