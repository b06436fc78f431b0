"""The one decision every deletion of the collector role goes through: may
it delete now, or does a pause hold it?

An operator pauses to look at the bucket as it is, so a pause holds every
kind of deletion the collector makes (``DeletingJob``): the L0 sweep, the
janitor, the controller log's truncation and the leader's tidying; in the
daemon, ``gc collect`` and ``gc spark`` alike. Two parts:

* ``PauseGuard.check(job)`` reads ``{root}/gc/control.json`` now and raises
  ``CollectorPausedError`` (``paused by WHO: REASON``) when it says paused,
  remembering the job as held. Each deleting pass calls it right before it
  starts (and dry runs, which delete nothing, do not).
* ``GuardedStore`` is the store a deleting job is given: it asks the guard
  before every DeleteObject / DeleteObjects request it sends. A job written
  against it cannot forget the pause, and a pause that lands mid-pass stops
  the pass before its next request (the requests already sent finish).

An unreadable or untrusted control document stops deleting too (the read
error is raised): deleting must not go on without knowing. What a pause
does not hold is not the collector's: the reconcilers' own work (their
partition logs' truncation, their leases and reports) and explicit operator
commands (``controller compact``, ``node forget``, ``topic delete``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from epochgc.errors import CollectorPausedError
from epochgc.events import Event, EventChannel
from epochgc.gc.control import DeletingJob, HeldJob, paused_message, read_control
from epochgc.runtime import utc_now
from epochgc.storage.object_store import (
    DeleteOutcome,
    ObjectInfo,
    ObjectStore,
    PagedStore,
    StoredObject,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeldJobsChanged(Event):
    """The set of jobs a pause holds changed; ``held`` is the new set."""

    held: tuple[HeldJob, ...]


class PauseGuard:
    """Decides, from the control document read now, whether a deleting job
    may go on, and remembers which jobs a pause held (for ``gc status``).

    Example::

        guard = PauseGuard(store, "epochgc")
        guard.check(DeletingJob.JANITOR)     # raises CollectorPausedError when paused
        guard.held()                         # (HeldJob(JANITOR, since=...),)

    Args:
        events: where ``HeldJobsChanged`` is published (outside the lock)
            when the set of held jobs changes: the daemon republishes its
            status then.
        now: the clock of ``HeldJob.since`` (for people only).
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        *,
        events: EventChannel | None = None,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store = store
        self._root = root
        self._events = events if events is not None else EventChannel()
        self._now = now
        self._lock = threading.Lock()
        self._held: dict[DeletingJob, HeldJob] = {}

    def check(self, job: DeletingJob) -> None:
        """Let ``job`` delete, or refuse because the collector is paused.

        Raises:
            CollectorPausedError: paused (``job`` is now held).
            MalformedRecordError, UnsupportedVersionError, StorageError: the
                control document cannot be read or trusted (nothing may be
                deleted without knowing).
        """
        doc, _etag = read_control(self._store, self._root)
        message = paused_message(doc)
        if message is None:
            self._release([job])
            return
        self.hold(job)
        raise CollectorPausedError(message)

    def hold(self, job: DeletingJob) -> None:
        """Record that ``job`` came due and did not run (already known to be
        paused, e.g. from the daemon's control polling)."""
        with self._lock:
            if job in self._held:
                return
            self._held[job] = HeldJob(job, self._now())
        log.info("%s held by the pause", job.what)
        self._changed()

    def release_all(self) -> tuple[HeldJob, ...]:
        """Forget every hold (the pause is over); return what was held."""
        with self._lock:
            released = self._sorted()
            self._held.clear()
        if released:
            self._changed()
        return released

    def held(self) -> tuple[HeldJob, ...]:
        """The jobs held now, in ``DeletingJob`` order."""
        with self._lock:
            return self._sorted()

    def _release(self, jobs: Iterable[DeletingJob]) -> None:
        with self._lock:
            gone = [job for job in jobs if self._held.pop(job, None) is not None]
        if gone:
            self._changed()

    def _sorted(self) -> tuple[HeldJob, ...]:
        return tuple(self._held[job] for job in DeletingJob if job in self._held)

    def _changed(self) -> None:
        self._events.publish(HeldJobsChanged(self.held()))


class GuardedStore(PagedStore):
    """An ``ObjectStore`` whose deletions ask a ``PauseGuard`` first, on
    behalf of one ``DeletingJob``: one control-document GET before each
    DeleteObject or DeleteObjects request (``delete_many`` is sent as
    batches of up to 1000 keys, one after another, each asked for).
    Everything else goes straight to the wrapped store.

    Example::

        janitor = Janitor(GuardedStore(store, guard, DeletingJob.JANITOR), root)

    Raises (from the deleting methods):
        CollectorPausedError: paused; this request and the rest of the
            pass are not sent.
    """

    def __init__(self, store: ObjectStore, guard: PauseGuard, job: DeletingJob) -> None:
        self._store = store
        self._guard = guard
        self._job = job

    @property
    def job(self) -> DeletingJob:
        return self._job

    @property
    def bucket(self) -> str:
        return self._store.bucket

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None) -> StoredObject:
        return self._store.get(key, byte_range=byte_range)

    def head(self, key: str) -> ObjectInfo:
        return self._store.head(key)

    def put(self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None) -> str:
        return self._store.put(key, body, metadata=metadata)

    def put_if_absent(
        self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        return self._store.put_if_absent(key, body, metadata=metadata)

    def put_if_match(
        self, key: str, body: bytes, etag: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        return self._store.put_if_match(key, body, etag, metadata=metadata)

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[list[ObjectInfo]]:
        return self._store.list_pages(prefix, start_after=start_after, page_size=page_size)

    def list_prefixes(self, prefix: str) -> list[str]:
        return self._store.list_prefixes(prefix)

    def delete(self, key: str) -> None:
        self._guard.check(self._job)
        self._store.delete(key)

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        self._guard.check(self._job)
        return self._store.delete_batch(keys)
