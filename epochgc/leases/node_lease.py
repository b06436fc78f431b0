"""This process's node liveness lease ``{root}/meta/nodes/{node_id}``
(docs/operating.md, "Nodes, ownership and balance"; the document:
``holder_codec.py``), on the lease core (``core.py``) like the singleton roles'
leases (``role_leases.py``).

One lease per node, whatever it owns: staying alive costs one CAS per renew
interval. The timing rules are every lease's (``timing.py``), so nothing
compares wall clocks across machines:

* the holder counts validity on its own monotonic clock: valid until
  ``sent + ttl - skew_margin`` of the last acquiring or renewing request;
  it owns nothing after that;
* another process (another incarnation of the same node id included) takes
  the lease object over only once it has seen the same ETag for a whole
  TTL on its own monotonic clock, or the lease is released; the lease is
  ours only while the object is the version of our own last write;
* every acquisition gets a fresh random incarnation, including a
  re-acquisition after a lapse: a lapsed holder is a new owner, its
  previous records are taken back with ``term + 1`` and the partition
  log's ``term_start`` fences anything the old one still had in flight;
* a renewal answered after the grant it renewed had ended is such a
  lapse too (it may have landed after a peer judged this node dead): the
  lease is taken again at once under a new incarnation, never counted as
  a renewal of the old one.

A conditional write answered 412 or 404 is checked by re-reading: it
counts only if the object holds exactly our bytes (the write landed and
its answer was lost); otherwise the log line says why (``core``: someone
else moved first, or a store that does not honour ``If-Match``).

The heartbeat renews the lease whatever the node's rounds do, so renewing
alone would prove only that the heartbeat runs. A *renewal gate*
(``set_renewal_gate``; the node installs its progress watchdog) says why
this process must not renew any more: from the moment it does, the lease
is not renewed, not taken again, and ``is_valid`` is false (so the node
owns nothing and its leaders' lease checks fail), while ``release`` still
works: a node that stops making progress lets go of its lease so the
others need not wait a TTL (``reconciler/node.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import NoReturn

from epochgc.errors import EpochGCError, LeaseLostError
from epochgc.leases.core import AcquireDecision, CasLease, Refused, Written, decide_acquire
from epochgc.leases.holder_codec import (
    ASSIGNMENT_VERSION,
    NodeLeaseDocument,
    decode_node_lease,
    encode_node_lease,
)
from epochgc.leases.timing import LeasePolicy
from epochgc.periodic import PeriodicThread
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.keys import node_lease_key
from epochgc.storage.object_store import ObjectStore

log = logging.getLogger(__name__)


def _never_closed() -> str | None:
    return None


class NodeLease:
    """Acquires, renews and releases one node's liveness lease.

    Example::

        lease = NodeLease(store, "epochgc", "reconciler-1")
        while not lease.try_acquire():   # a previous incarnation may hold it
            time.sleep(1)
        lease.renew_if_due()             # from the heartbeat loop
        lease.is_valid()                 # owns partitions only while True
        lease.release()                  # on stop: the node is gone at once

    Args:
        runtime: its wall clock is only written for display; its monotonic
            clock makes every timing decision; its ids are the
            incarnations (a fresh one per acquisition).
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        node_id: str,
        *,
        policy: LeasePolicy | None = None,
        runtime: Runtime = SYSTEM,
    ) -> None:
        self.node_id = node_id
        self.key = node_lease_key(root, node_id)
        self.policy = policy or LeasePolicy()
        self._now = runtime.wall
        self._monotonic = runtime.monotonic
        self._incarnations = runtime.new_id
        self.incarnation = ""
        """The current (or last) incarnation; empty before the first acquisition."""
        self._lease = CasLease(store, self.key, self.policy, decode_node_lease, runtime)
        self._grant: Written | None = None
        """Our last write that landed, while held."""
        self._recent: tuple[Written, ...] = ()
        """Our last two writes that landed (newest first), replaced whole so
        that other threads read it without a lock: a node listing made
        while a renewal was in flight shows the one before."""
        self.stats: dict[str, int] = {
            "acquired": 0,
            "renewals": 0,
            "lost": 0,
            "renew_failures": 0,
        }
        self.last_renew_seconds = 0.0
        """How long the last successful renewal took (for the metrics)."""
        self._gate: Callable[[], str | None] = _never_closed
        self._heartbeat = PeriodicThread(
            f"node-lease-{node_id}",
            max(0.05, self.policy.renew_interval_seconds / 4),
            self.renew_if_due,
            runtime=runtime,
        )

    # --- heartbeat -------------------------------------------------------------------

    def start(self) -> None:
        """Start the heartbeat thread: it renews the lease every renew
        interval while held, whatever the rounds are doing (a slow round
        must not cost the node its lease).

        Raises:
            RuntimeError: already started.
        """
        self._heartbeat.start()

    def stop(self, *, release: bool = True) -> None:
        """Stop the heartbeat; release the lease unless ``release`` is false
        (a kill -9 releases nothing: the others wait a TTL). Idempotent."""
        self._heartbeat.stop()
        if release:
            self.release()

    def set_renewal_gate(self, gate: Callable[[], str | None]) -> None:
        """Renew (and take, and count as valid) only while ``gate()`` is
        ``None``; its answer otherwise is why not (e.g. a loop of the node
        stopped). Checked before every renewal and by ``is_valid``, from any
        thread, so it must be quick and must not block."""
        self._gate = gate

    @property
    def closed_by(self) -> str | None:
        """Why this process may not renew the lease any more, or ``None``."""
        return self._gate()

    # --- queries -------------------------------------------------------------------

    def is_valid(self) -> bool:
        """Held, within ``sent + ttl - skew_margin`` of the last grant, and
        the renewal gate open (a node that stopped making progress owns
        nothing, even before its grant runs out)."""
        grant = self._grant
        return (
            grant is not None and self._lease.is_valid(grant.valid_until) and self._gate() is None
        )

    @property
    def valid_until(self) -> float:
        """Monotonic time after which this node must not act as an owner."""
        grant = self._grant
        return grant.valid_until if grant is not None else float("-inf")

    def answered_at(self, etag: str) -> float | None:
        """When the answer to our write that produced ``etag`` arrived
        (monotonic), if it is one of our last two; the store stamped that
        write no later (``timing.written_by``)."""
        for written in self._recent:
            if written.etag == etag:
                return written.answered
        return None

    @property
    def etag(self) -> str | None:
        """The ETag of our last write, while held."""
        grant = self._grant
        return grant.etag if grant is not None else None

    # --- acquire / renew / release -----------------------------------------------------

    def try_acquire(self) -> bool:
        """Take the lease with a fresh incarnation if it is missing, released,
        ours, or unchanged for a whole TTL; else ``False`` (call again later).

        Raises:
            MalformedRecordError, UnsupportedVersionError: the lease object
                is not a node lease this version can read (never overwritten).
            StorageError: the store failed.
        """
        with self._lease.writes:
            return self._try_acquire_serial()

    def _try_acquire_serial(self) -> bool:
        if self._gate() is not None:
            return False
        if self.is_valid():
            return True
        seen = self._lease.look()
        decision = decide_acquire(
            seen.doc,
            ours=self._grant is not None and seen.etag == self._grant.etag,
            holding=False,  # a valid grant returned above: ours is a lapsed one
            unchanged_for=seen.unchanged_for,
            ttl_seconds=self.policy.ttl_seconds,
        )
        if decision is AcquireDecision.WAIT:
            return False
        self.incarnation = self._incarnations()
        outcome = self._lease.take(decision, seen, self._body(released=False))
        if isinstance(outcome, Refused):
            log.log(outcome.level, "node lease %s not taken: %s", self.node_id, outcome.why)
            self._grant = None
            return False
        self._granted(outcome)
        self.stats["acquired"] += 1
        log.info("node lease %s acquired (incarnation %s)", self.node_id, self.incarnation)
        return True

    def renew_if_due(self) -> bool:
        """Renew when a renew interval has passed since the last grant was
        sent; ``True`` when a request was made. Never raises for a lost
        lease (``is_valid`` turns false); storage errors are logged and the
        grant runs out on its own clock.
        """
        grant = self._grant
        if grant is None or self._gate() is not None:
            return False
        if self._monotonic() - grant.sent < self.policy.renew_interval_seconds:
            return False
        try:
            self.renew()
        except LeaseLostError:
            pass
        except EpochGCError as err:
            self.stats["renew_failures"] += 1
            log.warning("renewing node lease %s failed: %s", self.node_id, err)
        return True

    def renew(self) -> None:
        """Extend the lease by one TTL (one CAS).

        Raises:
            LeaseLostError: not held, expired before the renewal was sent,
                the object changed under us, or the renewal gate is closed
                (then the lease is still ours to release).
            StorageError: the store failed (the grant stays as it was).
        """
        with self._lease.writes:
            self._renew_serial()

    def _renew_serial(self) -> None:
        grant = self._grant
        if grant is None:
            raise LeaseLostError(f"node lease {self.node_id!r} is not held")
        closed_by = self._gate()
        if closed_by is not None:
            raise LeaseLostError(f"node lease {self.node_id!r} not renewed: {closed_by}")
        if not self.is_valid():
            self._lose("expired before it could be renewed")
        outcome = self._lease.renew(grant.etag, self._body(released=False))
        if isinstance(outcome, Refused):
            self._lose(f"renewal not applied: {outcome.why}")
        if outcome.answered >= grant.valid_until:
            self._reacquire_after_late_answer(outcome, grant)
            return
        self._granted(outcome)
        self.stats["renewals"] += 1
        self.last_renew_seconds = outcome.answered - outcome.sent

    def _reacquire_after_late_answer(self, late: Written, lapsed: Written) -> None:
        """A renewal answered after the grant it renewed had ended may have
        landed after a peer judged this node dead and took its partitions
        (its records name this incarnation). Counted from its send time it
        would make this node valid again, still holding those records: two
        owners. So the lease is taken again at once, over the version the
        late renewal wrote, under a new incarnation: the ownership layer
        starts from nothing and takes its share again (``owned`` is empty
        meanwhile: the old grant has lapsed).

        Raises:
            LeaseLostError: the lease changed under us meanwhile.
            StorageError: the store failed (the old grant stays lapsed).
        """
        log.warning(
            "node lease %s: a renewal was answered %.1fs after its grant had ended; "
            "taking the lease again under a new incarnation",
            self.node_id,
            late.answered - lapsed.valid_until,
        )
        self.incarnation = self._incarnations()
        again = self._lease.renew(late.etag, self._body(released=False))
        if isinstance(again, Refused):
            self._lose(f"re-acquisition after a late renewal not applied: {again.why}")
        self._granted(again)
        self.stats["acquired"] += 1
        log.info("node lease %s acquired (incarnation %s)", self.node_id, self.incarnation)

    def release(self) -> None:
        """Give the lease up (``released: true``): other nodes drop this one
        from their live list at once. Best effort; never raises."""
        with self._lease.writes:
            self._release_serial()

    def _release_serial(self) -> None:
        grant, self._grant = self._grant, None
        if grant is None:
            return
        try:
            refused = self._lease.release(grant.etag, self._body(released=True))
        except EpochGCError as err:
            log.warning("could not release node lease %s (it will expire): %s", self.node_id, err)
            return
        if refused is not None:
            log.warning(
                "node lease %s was not ours to release any more: %s", self.node_id, refused.why
            )
            return
        log.info("node lease %s released (incarnation %s)", self.node_id, self.incarnation)

    # --- helpers ---------------------------------------------------------------------------

    def _granted(self, written: Written) -> None:
        self._grant = written
        self._recent = (written, *self._recent[:1])

    def _body(self, *, released: bool) -> bytes:
        at = self._now()
        return encode_node_lease(
            NodeLeaseDocument(
                self.node_id,
                self.incarnation,
                at,
                at + timedelta(seconds=self.policy.ttl_seconds),
                released,
                ASSIGNMENT_VERSION,
            )
        )

    def _lose(self, why: str) -> NoReturn:
        self._grant = None
        self._lease.forget_unanswered()
        self.stats["lost"] += 1
        log.warning("node lease %s lost (incarnation %s): %s", self.node_id, self.incarnation, why)
        raise LeaseLostError(f"node lease {self.node_id!r} lost: {why}")


def held_incarnation(lease: NodeLease) -> str | None:
    """``lease``'s incarnation while it is valid, else ``None``."""
    return lease.incarnation if lease.is_valid() else None
