"""Leases on S3 conditional writes (DESIGN.md section 7).

A lease is one object ``{root}/meta/leases/{name}`` holding
``{"v": 1, "holder", "term", "expires_at"}``. The pattern is etcd's lease
ownership, built on S3: create-only when the object is missing, CAS
(``If-Match``) to take it over once expired, CAS to renew, CAS to release;
one heartbeat loop per process renews all its leases. ``term`` grows on
every change of holder (and when a holder restarts its term after a failed
append) and is the fencing token every partition-log entry carries.

Timing, and why it is safe under bounded clock skew: a holder considers its
lease valid only until ``expires_at - skew_margin`` by its own clock and
stops writing after that; another process takes over only after
``expires_at`` by its clock. As long as clocks differ by less than the
margin, the two never write at once; and if they do, the term in every log
entry still fences the old holder on replay.

``decide_acquire`` is the pure decision; ``LeaseManager`` does the I/O.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

from epochgc.errors import (
    EpochGCError,
    LeaseLostError,
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


def encode_lease(doc: LeaseDocument) -> bytes:
    """Lease object bytes (millisecond RFC 3339 UTC expiry)."""
    expires = doc.expires_at.astimezone(UTC).isoformat(timespec="milliseconds")
    return dump_document(
        {
            "v": LEASE_VERSION,
            "holder": doc.holder,
            "term": doc.term,
            "expires_at": expires.replace("+00:00", "Z"),
        }
    )


def decode_lease(data: bytes, where: str) -> LeaseDocument:
    """Parse a lease object.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = load_document(data, where, LEASE_VERSION)
    return LeaseDocument(
        holder=get_str(doc, "holder", where),
        term=get_int(doc, "term", where, 1),
        expires_at=parse_time(get_str(doc, "expires_at", where), where),
    )


class AcquireDecision(Enum):
    """What to do about a lease object."""

    CREATE = "create"
    """No object: create it (create-only) with term 1."""
    TAKE_OVER = "take_over"
    """Expired or released: CAS it to us with term + 1."""
    RENEW = "renew"
    """Ours and still valid: renew with the same term."""
    WAIT = "wait"
    """Held by someone else until it expires."""


def decide_acquire(current: LeaseDocument | None, me: str, now: datetime) -> AcquireDecision:
    """Pure: how ``me`` may get the lease whose object holds ``current``."""
    if current is None:
        return AcquireDecision.CREATE
    if now >= current.expires_at:
        return AcquireDecision.TAKE_OVER
    if current.holder == me:
        return AcquireDecision.RENEW
    return AcquireDecision.WAIT


@dataclass(frozen=True)
class LeaseGrant:
    """A lease this process holds, as last written."""

    name: str
    holder: str
    term: int
    expires_at: datetime
    etag: str


@dataclass(frozen=True)
class LeasePolicy:
    """Lease timing.

    Attributes:
        ttl_seconds: how long a grant lasts without renewal (failover time
            after a crash).
        renew_interval_seconds: heartbeat period; well under the TTL so a
            couple of failed renewals are survivable.
        skew_margin_seconds: a holder stops writing this long before its
            lease expires; must exceed the clock skew between processes.
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
        now: injected wall clock (aware UTC).
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
    ) -> None:
        self._store = store
        self._root = root
        self.holder = f"{node_id}/{uuid.uuid4().hex[:12]}"
        self._policy = policy or LeasePolicy()
        self._on_lost = on_lost
        self._now = now
        self._lock = threading.Lock()
        self._grants: dict[str, LeaseGrant] = {}
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

    def _is_valid(self, grant: LeaseGrant) -> bool:
        margin = timedelta(seconds=self._policy.skew_margin_seconds)
        return self._now() < grant.expires_at - margin

    # --- acquire / renew / release -------------------------------------------

    def try_acquire(self, name: str) -> LeaseGrant | None:
        """Take the lease if it is free, expired or already ours; else None."""
        key = lease_key(self._root, name)
        current, etag = self._read(key)
        now = self._now()
        decision = decide_acquire(current, self.holder, now)
        expires = now + timedelta(seconds=self._policy.ttl_seconds)
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
        grant = LeaseGrant(name, self.holder, doc.term, expires, new_etag)
        with self._lock:
            self._grants[name] = grant
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
        with self._lock:
            held = self._grants.get(name)
        if held is not None and not self._is_valid(held):
            self._lose(name, "expired before it could be renewed")
        grant = self.check(name)
        now = self._now()
        doc = LeaseDocument(
            self.holder, grant.term + term_delta, now + timedelta(seconds=self._policy.ttl_seconds)
        )
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
            ):
                etag = current_etag  # our write landed; only the answer was lost
                doc = current
            else:
                self._lose(name, f"taken by {current.holder if current else 'nobody'}")
                raise LeaseLostError(f"lease {name!r} lost") from err
        new = LeaseGrant(name, self.holder, doc.term, doc.expires_at, etag)
        with self._lock:
            self._grants[name] = new
        return new

    def release(self, name: str) -> None:
        """Give the lease up now (expires at once, so failover is immediate)."""
        with self._lock:
            grant = self._grants.pop(name, None)
        if grant is None:
            return
        doc = LeaseDocument(self.holder, grant.term, self._now() - timedelta(seconds=1))
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
