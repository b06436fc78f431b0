"""Role leases: the singleton roles' leases ``{root}/meta/leases/{name}``
(``gc``, ``ticker``), several per process, on the lease core (``core.py``;
architecture: docs/architecture.md, "The bucket as a database"; the
document: docs/contract.md, "Leases").

The pattern is etcd's lease ownership, built on S3: create-only when the
object is missing, CAS (``If-Match``) to take it over once released or
unchanged for a whole TTL, CAS to renew, CAS to release; one heartbeat loop
per process renews all its leases. The holder id is the node id plus a
per-process random suffix, so a lease is ours exactly when it names that
id, and a restarted process never mistakes an old grant for its own.
``term`` grows on every change of holder. Partitions are owned through node
leases and ownership records instead (``node_lease.py``,
``ownership/node_ownership.py``), whose record term is the fencing token every
partition-log entry carries.

No decision compares wall clocks across processes (``timing.py``): a wall
clock minutes off, which ``epochgc verify`` injects, must neither keep a
dead holder's lease alive for minutes nor let a live holder lose it at
once. ``expires_at`` is written from the holder's wall clock for people and
status displays. Were two processes to write anyway (a holder frozen
between its validity check and its write), the term in every log entry
still fences the old holder on replay.

A renewal that did not land loses the lease at once, logged with the
reason (``core.explain_refusal``); holder and term alone prove nothing,
since our previous grant has the same ones. A store that rejects the very
ETag it returned thus loses every lease at its first renewal instead of
believing it holds one nobody can see; the capability probes refuse such a
store before anything starts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from epochgc.errors import EpochGCError, LeaseLostError
from epochgc.events import Event, EventChannel
from epochgc.leases import core
from epochgc.leases.core import AcquireDecision, CasLease, Refused, Written
from epochgc.leases.holder_codec import LeaseDocument, decode_lease, encode_lease
from epochgc.leases.timing import LeasePolicy
from epochgc.periodic import PeriodicThread
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.keys import lease_key
from epochgc.storage.object_store import ObjectStore, get_or_none

__all__ = [
    "LeaseDocument",
    "LeaseGrant",
    "LeaseManager",
    "decide_acquire",
    "decode_lease",
    "encode_lease",
]
"""``LeaseDocument`` and its codec live in ``holder_codec.py``; named here too
because readers of role leases import them from here."""

log = logging.getLogger(__name__)


def decide_acquire(
    current: LeaseDocument | None,
    me: str,
    *,
    holding: bool,
    unchanged_for: float | None,
    ttl_seconds: float,
) -> AcquireDecision:
    """Pure: how ``me`` may get the role lease whose object holds
    ``current`` (``core.decide_acquire``, ours when it names ``me``)."""
    return core.decide_acquire(
        current,
        ours=current is not None and current.holder == me,
        holding=holding,
        unchanged_for=unchanged_for,
        ttl_seconds=ttl_seconds,
    )


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
class LeaseLost(Event):
    """This process lost its grant of the role lease ``name``."""

    name: str


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
        events: where ``LeaseLost`` is published when a lease is lost.
        runtime: its wall clock is only written into ``expires_at`` for
            display; its monotonic clock makes every timing decision.
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        node_id: str,
        *,
        policy: LeasePolicy | None = None,
        events: EventChannel | None = None,
        runtime: Runtime = SYSTEM,
    ) -> None:
        self._store = store
        self._root = root
        self.holder = f"{node_id}/{runtime.new_id()[:12]}"
        self._policy = policy or LeasePolicy()
        self._events = events if events is not None else EventChannel()
        self._runtime = runtime
        self._now = runtime.wall
        self._monotonic = runtime.monotonic
        self._lock = runtime.lock()
        self._grants: dict[str, LeaseGrant] = {}
        self._leases: dict[str, CasLease[LeaseDocument]] = {}
        self._heartbeat = PeriodicThread(
            "lease-heartbeat", self._policy.renew_interval_seconds, self.renew_all, runtime=runtime
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
        stored = get_or_none(store, key)
        return None if stored is None else decode_lease(stored.body, key)

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

    def _lease(self, name: str) -> CasLease[LeaseDocument]:
        """The lease object ``name``, whose ``writes`` lock orders every
        write of it by this process (a heartbeat's renewal can never land
        after, and undo, a release)."""
        with self._lock:
            lease = self._leases.get(name)
            if lease is None:
                key = lease_key(self._root, name)
                lease = CasLease(self._store, key, self._policy, decode_lease, self._runtime)
                self._leases[name] = lease
            return lease

    def _is_valid(self, grant: LeaseGrant) -> bool:
        return self._lease(grant.name).is_valid(grant.valid_until)

    def _document(self, term: int) -> LeaseDocument:
        """A held lease at ``term``, its display expiry one TTL from now."""
        expires = self._now() + timedelta(seconds=self._policy.ttl_seconds)
        return LeaseDocument(self.holder, term, expires)

    def _keep(self, name: str, doc: LeaseDocument, written: Written) -> LeaseGrant:
        grant = LeaseGrant(
            name, self.holder, doc.term, doc.expires_at, written.etag, written.valid_until
        )
        with self._lock:
            self._grants[name] = grant
        return grant

    # --- acquire / renew / release -------------------------------------------

    def try_acquire(self, name: str) -> LeaseGrant | None:
        """Take the lease if it is missing, released, unchanged for a whole
        TTL (its holder is gone) or ours; else None."""
        lease = self._lease(name)
        with lease.writes:
            return self._try_acquire(name, lease)

    def _try_acquire(self, name: str, lease: CasLease[LeaseDocument]) -> LeaseGrant | None:
        seen = lease.look()
        decision = decide_acquire(
            seen.doc,
            self.holder,
            holding=self.grant(name) is not None,
            unchanged_for=seen.unchanged_for,
            ttl_seconds=self._policy.ttl_seconds,
        )
        if decision is AcquireDecision.WAIT:
            return None
        if seen.doc is None:
            term = 1
        elif decision is AcquireDecision.RENEW:
            term = seen.doc.term
        else:
            term = seen.doc.term + 1  # a change of holder
        doc = self._document(term)
        outcome = lease.take(decision, seen, encode_lease(doc))
        if isinstance(outcome, Refused):
            verb = "creation" if decision is AcquireDecision.CREATE else "take-over"
            log.log(outcome.level, "%s of lease %s failed: %s", verb, name, outcome.why)
            return None
        grant = self._keep(name, doc, outcome)
        if decision is not AcquireDecision.RENEW:
            self.stats["acquired"] += 1
            log.debug("acquired lease %s at term %d", name, doc.term)  # its holder says so
        return grant

    def renew(self, name: str) -> LeaseGrant:
        """Extend our lease by one TTL.

        Raises:
            LeaseLostError: another holder has it, or it expired before we
                could renew.
        """
        lease = self._lease(name)
        with lease.writes:
            return self._renew(name, lease)

    def _renew(self, name: str, lease: CasLease[LeaseDocument]) -> LeaseGrant:
        with self._lock:
            held = self._grants.get(name)
        if held is not None and not self._is_valid(held):
            self._lose(name, "expired before it could be renewed")
        grant = self.check(name)
        doc = self._document(grant.term)
        outcome = lease.renew(grant.etag, encode_lease(doc))
        if isinstance(outcome, Refused):
            self._lose(name, f"renewal not applied: {outcome.why}")
            raise LeaseLostError(f"lease {name!r} lost: {outcome.why}")
        return self._keep(name, doc, outcome)

    def release(self, name: str) -> None:
        """Give the lease up now (marked released, so failover is immediate)."""
        lease = self._lease(name)
        with lease.writes:
            self._release(name, lease)

    def _release(self, name: str, lease: CasLease[LeaseDocument]) -> None:
        with self._lock:
            grant = self._grants.pop(name, None)
        if grant is None:
            return
        doc = LeaseDocument(
            self.holder, grant.term, self._now() - timedelta(seconds=1), released=True
        )
        try:
            refused = lease.release(grant.etag, encode_lease(doc))
        except EpochGCError as err:
            log.warning("could not release lease %s (it will expire): %s", name, err)
            return
        if refused is not None:
            log.warning(
                "could not release lease %s (term %d; it will expire within the TTL): %s",
                name,
                grant.term,
                refused.why,
            )
            return
        log.info("released lease %s (term %d)", name, grant.term)

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
        self._lease(name).forget_unanswered()
        with self._lock:
            had = self._grants.pop(name, None)
        if had is not None:
            self.stats["lost"] += 1
            log.warning("lost lease %s (term %d): %s", name, had.term, why)
            self._events.publish(LeaseLost(name))

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
