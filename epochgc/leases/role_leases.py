"""Leases on S3 conditional writes (docs/architecture.md, "The bucket as a
database"; the document: docs/contract.md, "Leases").

A lease is one object ``{root}/meta/leases/{name}`` holding
``{"v": 1, "holder", "term", "expires_at"}``. The pattern is etcd's lease
ownership, built on S3: create-only when the object is missing, CAS
(``If-Match``) to take it over once expired, CAS to renew, CAS to release;
one heartbeat loop per process renews all its leases. ``term`` grows on
every change of holder. These are the singleton roles' leases (``gc``,
``ticker``); partitions are owned through node leases and ownership records
(``node_lease.py``, ``node_ownership.py``), whose record term is the
fencing token every partition-log entry carries.

Timing never compares wall clocks across processes (the approach of the
AWS DynamoDB lock client): a wall clock minutes off, which ``epochgc verify``
injects, must neither keep a dead holder's lease alive for minutes nor let
a live holder lose it at once.

* The holder counts validity on its own monotonic clock: a grant is valid
  until ``sent + ttl - skew_margin``, where ``sent`` is when the acquiring
  or renewing request was sent. It stops writing after that.
* Another process takes over only after it has seen the *same version* of
  the lease object (same ETag) for a whole ``ttl`` on its own monotonic
  clock: every renewal changes the ETag and restarts the watch. The watch
  starts after the holder's request was sent, so the holder has stopped
  before anyone takes over, whatever the wall clocks say, as long as
  monotonic clocks run at about the same rate (``skew_margin`` covers rate
  drift and request latency).
* A released lease (``"released": true``) is free at once.

A conditional write answered 412 (or 404) is never taken on trust either
way: the lease object is re-read, and the write counts as done only if the
object holds exactly the bytes we wrote (the write landed and only its
answer was lost, e.g. to a retry), or the bytes of one of our renewals that
failed without an answer (it landed, and nobody wrote after it: the
renewal goes again over that version). Any other renewal that did not land
loses the lease at once; holder and term alone prove nothing, since our
previous grant has the same ones. A store that rejects the very ETag it returned
(Ceph RGW 16 with quoted ETags) thus loses every lease at its first
renewal instead of believing it holds one nobody can see; the capability
probes refuse such a store before anything starts.

``expires_at`` is written from the holder's wall clock for people and
status displays; no decision uses it. Were both processes to write anyway
(a holder frozen between its validity check and its write), the term in
every log entry still fences the old holder on replay.

``decide_acquire`` is the pure decision; ``LeaseManager`` does the I/O.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

from epochgc.errors import (
    EpochGCError,
    LeaseLostError,
    NotFoundError,
    StorageError,
)
from epochgc.leases.codec import LeaseDocument, decode_lease, encode_lease
from epochgc.leases.timing import LeasePolicy, VersionWatch
from epochgc.periodic import PeriodicThread
from epochgc.storage.conditional_put import put_conditionally, remember_unanswered
from epochgc.storage.keys import lease_key
from epochgc.storage.object_store import ObjectStore, StoredObject

__all__ = [
    "AcquireDecision",
    "LeaseDocument",
    "LeaseGrant",
    "LeaseManager",
    "LeasePolicy",
    "decide_acquire",
    "decode_lease",
    "encode_lease",
]
"""``LeaseDocument`` and its codec live in ``codec.py``; named here too
because readers of role leases import them from here."""

log = logging.getLogger("epochgc.watermarks.leases")


class AcquireDecision(Enum):
    """What to do about a lease object."""

    CREATE = "create"
    """No object: create it (create-only) with term 1."""
    TAKE_OVER = "take_over"
    """Released, unchanged for a whole TTL, or an old grant of ours that
    we no longer hold: CAS it to us with term + 1."""
    RENEW = "renew"
    """Ours and still held: renew with the same term."""
    WAIT = "wait"
    """Someone else's, renewed within the last TTL (as far as we know)."""


def decide_acquire(
    current: LeaseDocument | None,
    me: str,
    *,
    holding: bool,
    unchanged_for: float | None,
    ttl_seconds: float,
) -> AcquireDecision:
    """Pure: how ``me`` may get the lease whose object holds ``current``.

    Args:
        holding: ``me`` holds a valid grant of this lease.
        unchanged_for: seconds (our monotonic clock) this exact version of
            the object has been seen unchanged; ``None`` on first sight.
        ttl_seconds: the lease TTL.
    """
    if current is None:
        return AcquireDecision.CREATE
    if current.holder == me:
        return AcquireDecision.RENEW if holding else AcquireDecision.TAKE_OVER
    if current.released:
        return AcquireDecision.TAKE_OVER
    if unchanged_for is not None and unchanged_for >= ttl_seconds:
        return AcquireDecision.TAKE_OVER
    return AcquireDecision.WAIT


@dataclass(frozen=True)
class LeaseGrant:
    """A lease this process holds, as last written."""

    name: str
    holder: str
    term: int
    expires_at: datetime
    etag: str
    valid_until: float
    """Monotonic time after which the holder must not write any more."""


class LeaseManager:
    """Acquires, renews and releases this process's leases.

    Example::

        leases = LeaseManager(store, "epochgc", node_id="reconciler-1")
        grant = leases.try_acquire("ticker")
        leases.start()          # heartbeat thread
        leases.check(grant.name)  # raises LeaseLostError once lost
        leases.stop()           # releases everything: immediate failover

    Args:
        node_id: readable part of the holder id; a per-process random suffix
            is added so a restarted process never mistakes an old grant for
            its own.
        on_lost: called with the lease name when a lease is lost.
        now: injected wall clock (aware UTC); only written into
            ``expires_at`` for display.
        monotonic: injected monotonic clock (seconds); every timing
            decision uses it.
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        node_id: str,
        *,
        policy: LeasePolicy | None = None,
        on_lost: Callable[[str], None] = lambda _name: None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._root = root
        self.holder = f"{node_id}/{uuid.uuid4().hex[:12]}"
        self._policy = policy or LeasePolicy()
        self._on_lost = on_lost
        self._now = now
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._grants: dict[str, LeaseGrant] = {}
        self._unanswered: dict[str, list[bytes]] = {}
        """Per lease, the bodies of renewals since the last answered one
        that failed without an answer: any may have landed."""
        self._name_locks: dict[str, threading.Lock] = {}
        self._watch = VersionWatch(self._policy.ttl_seconds)
        """Other holders' lease versions, by lease name."""
        self._heartbeat = PeriodicThread(
            "lease-heartbeat", self._policy.renew_interval_seconds, self.renew_all
        )
        self.stats: dict[str, int] = {"acquired": 0, "lost": 0, "renew_failures": 0}

    # --- queries ------------------------------------------------------------

    @staticmethod
    def read_holder(store: ObjectStore, root: str, name: str) -> LeaseDocument | None:
        """The lease object as stored, for status displays (``None``: never
        taken). Whether it is still valid is the reader's comparison of
        ``expires_at`` with its clock.

        Raises:
            MalformedRecordError, UnsupportedVersionError, StorageError.
        """
        key = lease_key(root, name)
        try:
            return decode_lease(store.get(key).body, key)
        except NotFoundError:
            return None

    def grant(self, name: str) -> LeaseGrant | None:
        """The grant for ``name`` if it is still valid by our clock."""
        with self._lock:
            grant = self._grants.get(name)
        if grant is None or not self._is_valid(grant):
            return None
        return grant

    def check(self, name: str) -> LeaseGrant:
        """The valid grant for ``name``.

        Raises:
            LeaseLostError: not held (never acquired, expired or lost).
        """
        grant = self.grant(name)
        if grant is None:
            raise LeaseLostError(f"lease {name!r} is not held by {self.holder}")
        return grant

    def held(self) -> list[str]:
        """Names of the leases this process currently holds."""
        with self._lock:
            names = list(self._grants)
        return [n for n in names if self.grant(n) is not None]

    def _serial(self, name: str) -> threading.Lock:
        """The lock that orders every write of one lease by this process, so
        a heartbeat's renewal can never land after (and undo) a release."""
        with self._lock:
            return self._name_locks.setdefault(name, threading.Lock())

    def _is_valid(self, grant: LeaseGrant) -> bool:
        return self._monotonic() < grant.valid_until

    def _valid_until(self, sent: float) -> float:
        return self._policy.valid_until(sent)

    def _unchanged_for(self, name: str, etag: str | None) -> float | None:
        """How long ``etag`` of lease ``name`` has been seen unchanged, or
        ``None`` when it is new to us."""
        now = self._monotonic()
        with self._lock:
            return self._watch.see(name, etag, now)

    # --- acquire / renew / release -------------------------------------------

    def try_acquire(self, name: str) -> LeaseGrant | None:
        """Take the lease if it is missing, released, unchanged for a whole
        TTL (its holder is gone) or ours; else None."""
        with self._serial(name):
            return self._try_acquire(name)

    def _try_acquire(self, name: str) -> LeaseGrant | None:
        key = lease_key(self._root, name)
        current, etag = self._read(key)
        decision = decide_acquire(
            current,
            self.holder,
            holding=self.grant(name) is not None,
            unchanged_for=self._unchanged_for(name, etag),
            ttl_seconds=self._policy.ttl_seconds,
        )
        expires = self._now() + timedelta(seconds=self._policy.ttl_seconds)
        sent = self._monotonic()
        if decision is AcquireDecision.WAIT:
            return None
        if decision is AcquireDecision.CREATE:
            doc = LeaseDocument(self.holder, 1, expires)
        else:
            assert current is not None and etag is not None
            term = current.term if decision is AcquireDecision.RENEW else current.term + 1
            doc = LeaseDocument(self.holder, term, expires)
        body = encode_lease(doc)
        written = put_conditionally(
            self._store, key, body, None if decision is AcquireDecision.CREATE else etag
        )
        if written is None:
            level, why = self._why_not_taken(decision, etag, self._read_raw(key))
            verb = "creation" if decision is AcquireDecision.CREATE else "take-over"
            log.log(level, "%s of lease %s failed: %s", verb, name, why)
            return None
        new_etag = written
        grant = LeaseGrant(name, self.holder, doc.term, expires, new_etag, self._valid_until(sent))
        with self._lock:
            self._grants[name] = grant
            self._watch.forget(name)
        if decision is not AcquireDecision.RENEW:
            self.stats["acquired"] += 1
            log.info("acquired lease %s at term %d", name, doc.term)
        return grant

    def renew(self, name: str) -> LeaseGrant:
        """Extend our lease by one TTL.

        Raises:
            LeaseLostError: another holder has it, or it expired before we
                could renew.
        """
        with self._serial(name):
            return self._renew_serial(name)

    def _renew_serial(self, name: str) -> LeaseGrant:
        with self._lock:
            held = self._grants.get(name)
        if held is not None and not self._is_valid(held):
            self._lose(name, "expired before it could be renewed")
        grant = self.check(name)
        doc = LeaseDocument(
            self.holder,
            grant.term,
            self._now() + timedelta(seconds=self._policy.ttl_seconds),
        )
        sent = self._monotonic()
        key = lease_key(self._root, name)
        body = encode_lease(doc)
        unanswered = self._unanswered.pop(name, [])
        try:
            etag = put_conditionally(self._store, key, body, grant.etag, unanswered=unanswered)
        except StorageError:
            self._unanswered[name] = remember_unanswered(unanswered, body)
            raise
        if etag is None:
            why = self._why_not_ours(grant, self._read_raw(key))
            self._lose(name, f"renewal not applied: {why}")
            raise LeaseLostError(f"lease {name!r} lost: {why}")
        new = LeaseGrant(name, self.holder, doc.term, doc.expires_at, etag, self._valid_until(sent))
        with self._lock:
            self._grants[name] = new
        return new

    def release(self, name: str) -> None:
        """Give the lease up now (marked released, so failover is immediate)."""
        with self._serial(name):
            self._release(name)

    def _release(self, name: str) -> None:
        with self._lock:
            grant = self._grants.pop(name, None)
        if grant is None:
            return
        doc = LeaseDocument(
            self.holder, grant.term, self._now() - timedelta(seconds=1), released=True
        )
        key = lease_key(self._root, name)
        body = encode_lease(doc)
        unanswered = self._unanswered.pop(name, [])
        try:
            if put_conditionally(self._store, key, body, grant.etag, unanswered=unanswered) is None:
                log.warning(
                    "could not release lease %s (term %d; it will expire within the TTL): %s",
                    name,
                    grant.term,
                    self._why_not_ours(grant, self._read_raw(key)),
                )
                return
            log.info("released lease %s (term %d)", name, grant.term)
        except EpochGCError as err:
            log.warning("could not release lease %s (it will expire): %s", name, err)

    def release_all(self) -> None:
        """Release every lease this process holds."""
        with self._lock:
            names = list(self._grants)
        for name in names:
            self.release(name)

    def renew_all(self) -> None:
        """One heartbeat: renew every held lease; report the ones lost."""
        with self._lock:
            names = list(self._grants)
        for name in names:
            try:
                self.renew(name)
            except LeaseLostError:
                continue
            except EpochGCError as err:
                self.stats["renew_failures"] += 1
                log.warning("renewing lease %s failed: %s", name, err)
                with self._lock:
                    grant = self._grants.get(name)
                if grant is not None and not self._is_valid(grant):
                    self._lose(name, "could not renew before expiry")

    def _lose(self, name: str, why: str) -> None:
        self._unanswered.pop(name, None)
        with self._lock:
            had = self._grants.pop(name, None)
        if had is not None:
            self.stats["lost"] += 1
            log.warning("lost lease %s (term %d): %s", name, had.term, why)
            self._on_lost(name)

    def _read_raw(self, key: str) -> StoredObject | None:
        """The lease object as stored, or ``None`` when there is none."""
        try:
            return self._store.get(key)
        except NotFoundError:
            return None

    def _describe(self, stored: StoredObject | None) -> str:
        if stored is None:
            return "the lease object is gone"
        try:
            doc = decode_lease(stored.body, stored.key)
        except EpochGCError as err:
            return f"the lease object is unreadable ({err})"
        state = "released" if doc.released else "held"
        return f"{state} by {doc.holder} at term {doc.term}"

    def _why_not_ours(self, grant: LeaseGrant, stored: StoredObject | None) -> str:
        """Why a conditional write of our grant did not land, in one line
        (``stored``: the object as re-read after the refusal)."""
        answer = "404" if stored is None else "412"
        if stored is not None and stored.etag == grant.etag:
            return (
                f"the store rejected ({answer}) the ETag it had returned for our grant "
                f"({grant.etag}) although the lease had not changed: it does not honour "
                "If-Match (run `epochgc check-store`)"
            )
        return f"the lease changed under us ({answer}): now {self._describe(stored)}"

    def _why_not_taken(
        self,
        decision: AcquireDecision,
        etag: str | None,
        stored: StoredObject | None,
    ) -> tuple[int, str]:
        """The log level and reason of a failed create or take-over: a race
        lost is routine (INFO); a store refusing an unchanged lease's own
        ETag is a broken store (WARNING)."""
        answer = "404" if stored is None else "412"
        if decision is not AcquireDecision.CREATE and stored is not None and stored.etag == etag:
            return logging.WARNING, (
                f"the store rejected ({answer}) the ETag it had returned although the "
                "lease had not changed since we read it: it does not honour If-Match "
                "(run `epochgc check-store`)"
            )
        return logging.INFO, f"someone else moved first ({answer}); now {self._describe(stored)}"

    def _read(self, key: str) -> tuple[LeaseDocument | None, str | None]:
        try:
            stored = self._store.get(key)
        except NotFoundError:
            return None, None
        return decode_lease(stored.body, key), stored.etag

    # --- heartbeat -------------------------------------------------------------

    def start(self) -> None:
        """Start the heartbeat thread (one for all of this process's leases).

        Raises:
            RuntimeError: already started.
        """
        self._heartbeat.start()

    def stop(self, *, release: bool = True) -> None:
        """Stop the heartbeat and (by default) release every lease. Idempotent."""
        self._heartbeat.stop()
        if release:
            self.release_all()
