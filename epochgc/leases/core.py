"""The one compare-and-swap lease every holder of epochgc sits on: the
singleton roles' leases (``role_leases.py``: several names per process) and
the node liveness lease (``node_lease.py``: one per node). Whatever the
document says (``holder_codec.py``), getting, keeping and giving up a lease object
is the same four steps over ``ObjectStore`` conditional writes, and this
module is the only place they are written:

* look: read the object with its ETag and note how long this version has
  been seen unchanged (``timing.VersionWatch``);
* decide (``decide_acquire``, pure): create it if missing, take it over if
  released, unchanged for a whole TTL or an old grant of ours, renew it if
  ours and held, else wait;
* write: create-only, or ``If-Match`` the ETag we read (take-over) or the
  ETag of our last write (renewal, release), through
  ``storage/conditional_put.py``: a write answered 412 or 404 counts only
  if the object holds exactly our bytes, or the bytes of one of our earlier
  renewals that failed without an answer (kept here, per lease object);
* deadline: a grant is valid on the holder's monotonic clock until
  ``sent + ttl - skew_margin`` (``timing.LeasePolicy.valid_until``).

A write that did not land is explained by re-reading the object
(``explain_refusal``): someone else moved first, or the store rejected the
very ETag it had returned although nothing changed, which is a store that
does not honour ``If-Match`` (Ceph RGW 16 with quoted ETags). Both lease
kinds report it the same way.

What "ours" means is the layer's: a role lease is ours when it names this
process's holder id; a node lease when it is the version of our own last
write (a previous incarnation of the same node id is not us).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

from epochgc.errors import EpochGCError, StorageError
from epochgc.leases.timing import LeasePolicy, VersionWatch
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.conditional_put import put_conditionally, remember_unanswered
from epochgc.storage.object_store import ObjectStore, StoredObject, get_or_none


class HolderDocument(Protocol):
    """What the core needs of a lease document."""

    @property
    def released(self) -> bool:
        """Given up by its holder: free at once."""
        ...

    def who(self) -> str:
        """The holder, for log lines."""
        ...


D = TypeVar("D", bound=HolderDocument)


class AcquireDecision(Enum):
    """What to do about a lease object."""

    CREATE = "create"
    """No object: create it (create-only)."""
    TAKE_OVER = "take_over"
    """Released, unchanged for a whole TTL, or an old grant of ours that
    we no longer hold: CAS it to us."""
    RENEW = "renew"
    """Ours and still held: renew it."""
    WAIT = "wait"
    """Someone else's, renewed within the last TTL (as far as we know)."""


def decide_acquire(
    current: HolderDocument | None,
    *,
    ours: bool,
    holding: bool,
    unchanged_for: float | None,
    ttl_seconds: float,
) -> AcquireDecision:
    """Pure: how to get the lease whose object holds ``current`` (``None``:
    no object). Wall-clock times in the document never matter.

    Args:
        ours: the object is ours (see the module docstring).
        holding: we hold a valid grant of this lease.
        unchanged_for: seconds (our monotonic clock) this exact version of
            the object has been seen unchanged; ``None`` on first sight.
        ttl_seconds: the lease TTL.
    """
    if current is None:
        return AcquireDecision.CREATE
    if ours:
        return AcquireDecision.RENEW if holding else AcquireDecision.TAKE_OVER
    if current.released:
        return AcquireDecision.TAKE_OVER
    if unchanged_for is not None and unchanged_for >= ttl_seconds:
        return AcquireDecision.TAKE_OVER
    return AcquireDecision.WAIT


@dataclass(frozen=True)
class Sighting(Generic[D]):
    """The lease object as one look found it."""

    doc: D | None
    """``None``: there is no object."""
    etag: str | None
    unchanged_for: float | None
    """Seconds this version has been seen unchanged; ``None``: first sight."""


@dataclass(frozen=True)
class Written:
    """A write of ours that landed."""

    etag: str
    """What the next CAS names."""
    sent: float
    """Monotonic time the request was sent."""
    answered: float
    """Monotonic time the answer arrived: the store stamped the write
    between ``sent`` and this (``timing.written_by``)."""
    valid_until: float
    """Monotonic time after which the holder must not act any more."""


@dataclass(frozen=True)
class Refused:
    """Why a conditional write of ours did not land."""

    why: str
    store_ignores_if_match: bool
    """The store rejected the ETag it had returned for an unchanged object."""

    @property
    def level(self) -> int:
        """A race lost is routine (INFO); a broken store is not (WARNING)."""
        return logging.WARNING if self.store_ignores_if_match else logging.INFO


def explain_refusal(
    etag: str | None,
    stored: StoredObject | None,
    decode: Callable[[bytes, str], HolderDocument],
    *,
    taking: bool,
) -> Refused:
    """The one diagnosis of a conditional write that did not land.

    Args:
        etag: the ETag the write named (``None``: a create-only write).
        stored: the object as re-read after the refusal.
        taking: we were creating or taking the lease over (else renewing
            or releasing one we held).
    """
    answer = "404" if stored is None else "412"
    if etag is not None and stored is not None and stored.etag == etag:
        return Refused(
            f"the store rejected ({answer}) the ETag it had returned ({etag}) although "
            "the lease had not changed: it does not honour If-Match "
            "(run `epochgc check-store`)",
            store_ignores_if_match=True,
        )
    now = _describe(stored, decode)
    if taking:
        return Refused(f"someone else moved first ({answer}); now {now}", False)
    return Refused(f"the lease changed under us ({answer}): now {now}", False)


def _describe(stored: StoredObject | None, decode: Callable[[bytes, str], HolderDocument]) -> str:
    if stored is None:
        return "the lease object is gone"
    try:
        doc = decode(stored.body, stored.key)
    except EpochGCError as err:
        return f"the lease object is unreadable ({err})"
    return f"{'released' if doc.released else 'held'} by {doc.who()}"


class CasLease(Generic[D]):
    """One lease object ``key`` as this process reads and writes it.

    Example (what ``LeaseManager.try_acquire`` does)::

        lease = CasLease(store, lease_key(root, "gc"), policy, decode_lease)
        with lease.writes:
            seen = lease.look()
            decision = decide_acquire(seen.doc, ours=..., holding=False,
                                      unchanged_for=seen.unchanged_for, ttl_seconds=15.0)
            if decision is not AcquireDecision.WAIT:
                outcome = lease.take(decision, seen, body)  # Written or Refused

    The caller keeps its grant (the ``Written`` of its last write) and
    passes its ETag to ``renew`` and ``release``. The object keeps what
    belongs to the lease object itself: the watch of other holders'
    versions and the bodies of our renewals that failed without an answer.

    Args:
        decode: the document's codec (``holder_codec.py``); raises
            ``MalformedRecordError`` or ``UnsupportedVersionError`` for an
            object this version cannot read, which is never overwritten.
        runtime: its monotonic clock makes every timing decision; its
            lock orders this process's writes.
    """

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        policy: LeasePolicy,
        decode: Callable[[bytes, str], D],
        runtime: Runtime = SYSTEM,
    ) -> None:
        self._store = store
        self.key = key
        self.policy = policy
        self._decode = decode
        self._monotonic = runtime.monotonic
        self._watch = VersionWatch(policy.ttl_seconds)
        self._unanswered: list[bytes] = []
        """Bodies of renewals since the last answered one that failed
        without an answer: any may have landed."""
        self.writes = runtime.lock()
        """Orders this process's writes of the object (a heartbeat's renewal
        must never land after, and undo, a release). Callers hold it across
        a look and the write that follows."""

    def is_valid(self, valid_until: float) -> bool:
        """A grant valid until ``valid_until`` may still be acted on."""
        return self._monotonic() < valid_until

    def look(self) -> Sighting[D]:
        """Read the object and note its version.

        Raises:
            MalformedRecordError, UnsupportedVersionError, StorageError.
        """
        with self.writes:
            stored = get_or_none(self._store, self.key)
            doc = None if stored is None else self._decode(stored.body, self.key)
            etag = None if stored is None else stored.etag
            unchanged_for = self._watch.see(self.key, etag, self._monotonic())
            return Sighting(doc, etag, unchanged_for)

    def take(self, decision: AcquireDecision, seen: Sighting[D], body: bytes) -> Written | Refused:
        """Write ``body`` as ``decision`` says: create-only, or over the
        version ``seen`` (take-over, or a renewal found by ``look``).

        Raises:
            StorageError: the store failed.
        """
        if decision is AcquireDecision.WAIT:
            raise ValueError("nothing to write while waiting")
        over = None if decision is AcquireDecision.CREATE else seen.etag
        with self.writes:
            sent = self._monotonic()
            etag = put_conditionally(self._store, self.key, body, over)
            if etag is None:
                return self._refused(over, taking=True)
            self._watch.forget(self.key)
            return self._written(etag, sent)

    def renew(self, etag: str, body: bytes) -> Written | Refused:
        """Replace our version ``etag`` with ``body``. A storage error keeps
        ``body`` as an unanswered renewal (it may have landed).

        Raises:
            StorageError: the store failed.
        """
        with self.writes:
            sent = self._monotonic()
            unanswered, self._unanswered = self._unanswered, []
            try:
                written = put_conditionally(
                    self._store, self.key, body, etag, unanswered=unanswered
                )
            except StorageError:
                self._unanswered = remember_unanswered(unanswered, body)
                raise
            if written is None:
                return self._refused(etag, taking=False)
            return self._written(written, sent)

    def release(self, etag: str, body: bytes) -> Refused | None:
        """Replace our version ``etag`` with the released ``body``;
        ``None`` when it landed.

        Raises:
            StorageError: the store failed (the lease runs out on its own).
        """
        with self.writes:
            unanswered, self._unanswered = self._unanswered, []
            if (
                put_conditionally(self._store, self.key, body, etag, unanswered=unanswered)
                is not None
            ):
                return None
            return self._refused(etag, taking=False)

    def forget_unanswered(self) -> None:
        """The lease is lost: none of our unanswered renewals can matter."""
        with self.writes:
            self._unanswered = []

    def _written(self, etag: str, sent: float) -> Written:
        return Written(etag, sent, self._monotonic(), self.policy.valid_until(sent))

    def _refused(self, etag: str | None, *, taking: bool) -> Refused:
        return explain_refusal(
            etag, get_or_none(self._store, self.key), self._decode, taking=taking
        )
