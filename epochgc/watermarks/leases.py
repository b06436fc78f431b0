"""Leases on S3 conditional writes (DESIGN.md section 7).

A lease is one object ``{root}/meta/leases/{name}`` holding
``{"v": 1, "holder", "term", "expires_at"}``. The pattern is etcd's lease
ownership, built on S3: create-only when the object is missing, CAS
(``If-Match``) to take it over once expired, CAS to renew, CAS to release;
one heartbeat loop per process renews all its leases. ``term`` grows on
every change of holder (and when a holder restarts its term after a failed
append) and is the fencing token every partition-log entry carries.

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
    MalformedRecordError,
    NotFoundError,
    PreconditionFailedError,
)
from epochgc.periodic import PeriodicThread
from epochgc.storage.keys import lease_key
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.records import (
    dump_document,
    get_int,
    get_str,
    load_document,
    parse_time,
)

log = logging.getLogger("epochgc.watermarks.leases")

LEASE_VERSION = 1


@dataclass(frozen=True)
class LeaseDocument:
    """The content of a lease object."""

    holder: str
    term: int
    expires_at: datetime
    """The holder's wall-clock estimate, for display only."""
    released: bool = False
    """Given up by its holder: anyone may take it at once."""


def encode_lease(doc: LeaseDocument) -> bytes:
    """Lease object bytes (millisecond RFC 3339 UTC expiry; ``released``
    only when true, so a held lease reads as it always did)."""
    expires = doc.expires_at.astimezone(UTC).isoformat(timespec="milliseconds")
    fields: dict[str, object] = {
        "v": LEASE_VERSION,
        "holder": doc.holder,
        "term": doc.term,
        "expires_at": expires.replace("+00:00", "Z"),
    }
    if doc.released:
        fields["released"] = True
    return dump_document(fields)


def decode_lease(data: bytes, where: str) -> LeaseDocument:
    """Parse a lease object.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = load_document(data, where, LEASE_VERSION)
    released = doc.get("released", False)
    if not isinstance(released, bool):
        raise MalformedRecordError(f"{where}: 'released' must be true or false")
    return LeaseDocument(
        holder=get_str(doc, "holder", where),
        term=get_int(doc, "term", where, 1),
        expires_at=parse_time(get_str(doc, "expires_at", where), where),
        released=released,
    )


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


@dataclass(frozen=True)
class LeasePolicy:
    """Lease timing.

    Attributes:
        ttl_seconds: how long a grant lasts without renewal (failover time
            after a crash).
        renew_interval_seconds: heartbeat period; well under the TTL so a
            couple of failed renewals are survivable.
        skew_margin_seconds: a holder stops writing this long before a
            TTL has passed since it sent its last renewal; covers request
            latency and monotonic clocks running at slightly different
            rates (wall-clock skew does not matter).
    """

    ttl_seconds: float = 15.0
    renew_interval_seconds: float = 5.0
    skew_margin_seconds: float = 2.0

    def __post_init__(self) -> None:
        if self.ttl_seconds <= 0 or self.renew_interval_seconds <= 0:
            raise ValueError("lease ttl and renew interval must be > 0")
        if self.renew_interval_seconds + self.skew_margin_seconds >= self.ttl_seconds:
            raise ValueError(
                "renew_interval_seconds + skew_margin_seconds must be below ttl_seconds, "
                "or a healthy holder would lose its lease between heartbeats"
            )


class LeaseManager:
    """Acquires, renews and releases this process's leases.

    Example::

        leases = LeaseManager(store, "epochgc", node_id="reconciler-1")
        grant = leases.try_acquire("partition.orders.0")
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
        self._name_locks: dict[str, threading.Lock] = {}
        self._watched: dict[str, tuple[str, float]] = {}
        """Lease name -> (ETag last seen, monotonic time it was first seen)."""
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
        return sent + self._policy.ttl_seconds - self._policy.skew_margin_seconds

    def _unchanged_for(self, name: str, etag: str | None) -> float | None:
        """Watch the version of a lease object: how long ``etag`` has been
        seen unchanged, or ``None`` when it is new to us."""
        now = self._monotonic()
        with self._lock:
            if etag is None:
                self._watched.pop(name, None)
                return None
            seen = self._watched.get(name)
            if seen is None or seen[0] != etag:
                self._watched[name] = (etag, now)
                return None
            return now - seen[1]

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
        try:
            if decision is AcquireDecision.WAIT:
                return None
            if decision is AcquireDecision.CREATE:
                doc = LeaseDocument(self.holder, 1, expires)
                new_etag = self._store.put_if_absent(key, encode_lease(doc))
            else:
                assert current is not None and etag is not None
                term = current.term if decision is AcquireDecision.RENEW else current.term + 1
                doc = LeaseDocument(self.holder, term, expires)
                new_etag = self._store.put_if_match(key, encode_lease(doc), etag)
        except (PreconditionFailedError, NotFoundError):
            return None  # someone else moved first; try again later
        grant = LeaseGrant(name, self.holder, doc.term, expires, new_etag, self._valid_until(sent))
        with self._lock:
            self._grants[name] = grant
            self._watched.pop(name, None)
        if decision is not AcquireDecision.RENEW:
            self.stats["acquired"] += 1
            log.info("acquired lease %s at term %d", name, doc.term)
        return grant

    def bump_term(self, name: str) -> LeaseGrant:
        """Move our own lease to a new term (a leader restarting its term).

        Raises:
            LeaseLostError: the lease is not ours any more.
        """
        return self._rewrite(name, term_delta=1)

    def renew(self, name: str) -> LeaseGrant:
        """Extend our lease by one TTL.

        Raises:
            LeaseLostError: another holder has it, or it expired before we
                could renew.
        """
        return self._rewrite(name, term_delta=0)

    def _rewrite(self, name: str, term_delta: int) -> LeaseGrant:
        with self._serial(name):
            return self._rewrite_serial(name, term_delta)

    def _rewrite_serial(self, name: str, term_delta: int) -> LeaseGrant:
        with self._lock:
            held = self._grants.get(name)
        if held is not None and not self._is_valid(held):
            self._lose(name, "expired before it could be renewed")
        grant = self.check(name)
        doc = LeaseDocument(
            self.holder,
            grant.term + term_delta,
            self._now() + timedelta(seconds=self._policy.ttl_seconds),
        )
        sent = self._monotonic()
        key = lease_key(self._root, name)
        try:
            etag = self._store.put_if_match(key, encode_lease(doc), grant.etag)
        except (PreconditionFailedError, NotFoundError) as err:
            current, current_etag = self._read(key)
            if (
                current is not None
                and current_etag is not None
                and current.holder == self.holder
                and current.term == doc.term
                and not current.released
            ):
                etag = current_etag  # our write landed; only the answer was lost
                doc = current
            else:
                self._lose(name, f"taken by {current.holder if current else 'nobody'}")
                raise LeaseLostError(f"lease {name!r} lost") from err
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
        try:
            self._store.put_if_match(lease_key(self._root, name), encode_lease(doc), grant.etag)
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
        with self._lock:
            had = self._grants.pop(name, None)
        if had is not None:
            self.stats["lost"] += 1
            log.warning("lost lease %s (term %d): %s", name, had.term, why)
            self._on_lost(name)

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
