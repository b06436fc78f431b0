"""The timing rules every lease of epochgc follows (the lease core
``core.py`` under the singleton roles' leases and the node leases, and
other nodes' leases as ``cluster_view.py`` judges them). Pure: no I/O, the
monotonic time comes in as an argument.

Nothing compares wall clocks across processes (the approach of the AWS
DynamoDB lock client):

* the holder counts validity on its own monotonic clock: a grant is valid
  until ``sent + ttl - skew_margin`` (``valid_until``), where ``sent`` is
  when the acquiring or renewing request was sent;
* anyone else calls the holder gone only after seeing the *same version*
  of the lease object (same ETag) for a whole TTL on its own monotonic
  clock (``VersionWatch``): every renewal changes the ETag and restarts the
  watch, and the watch starts after the holder's request was sent, so the
  holder has stopped before anyone takes over;
* a released lease is free at once (the caller knows from the body);
* a watcher that saw a lease's *previous* version may start the watch of
  the new one earlier than it first saw it, at the latest time the store's
  own stamps allow for the write (``written_by``): the difference of two
  LastModified stamps of one listing (the other node's lease and this
  node's own, whose write this process timed), plus the stamps' one-second
  resolution. Only the store's clock is read, and only as a difference;
  its consistency between two stamps is the one assumption, and what the
  skew margin absorbs beyond the resolution (``[ownership]
  use_store_timestamps`` turns it off). Without it a survivor that lists
  once a round calls a dead node gone up to a round late. Stamps are read
  only against a recent previous listing (``stamps_checkable``), which
  catches a gateway far off at its first use (``stamps_contradict``); a
  gateway off by more than the skew margin but less than that goes
  unnoticed (docs/operating.md says when to turn the stamps off).

The "stored bytes are ours" rule for conditional writes lives in
``storage/conditional_put.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

STAMP_RESOLUTION_SECONDS = 1.0
"""How coarse the store's LastModified stamps may be: S3 lists them in
whole seconds (truncated or rounded, either way two stamps' difference is
off by less than this)."""

STAMP_TOLERANCE_SECONDS = 2.0
"""How far before a listing that still showed a lease's previous version
the stamps may put the new version's write (the resolution, plus the time
a write spends at the store between its stamp and its commit) before they
are called inconsistent (``stamps_contradict``)."""


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

    def valid_until(self, sent: float) -> float:
        """The holder's own deadline for a grant whose request was sent at
        ``sent`` (its monotonic clock): it must not act after it."""
        return sent + self.ttl_seconds - self.skew_margin_seconds


STAMP_GAP_SHARE = 0.5
"""Stamps are read from a listing only when the previous listing judged
began at most this share of a TTL before it (``stamps_checkable``)."""


def stamps_checkable(listing_started: float, previous_started: float, ttl_seconds: float) -> bool:
    """Whether a listing that began at ``listing_started`` may read the
    store's stamps, the previous listing judged having begun at
    ``previous_started`` (same monotonic clock). The stamps are checked
    against that previous listing (``stamps_contradict``): a write they put
    before it is impossible. Only a recent one makes the check strong: with
    at most half a TTL between the two, a gateway whose clock is off by
    more than half a TTL plus ``STAMP_TOLERANCE_SECONDS`` is caught at its
    first use; after a longer gap (a pause, a wait for the lease) such a
    stamp could put a live node's last renewal a TTL in the past. Pure."""
    return listing_started - previous_started <= STAMP_GAP_SHARE * ttl_seconds


def written_by(own_answered: float, own_stamp: datetime, other_stamp: datetime) -> float:
    """The latest time, on this process's monotonic clock, at which the
    write the store stamped ``other_stamp`` can have been sent, given this
    process's own write stamped ``own_stamp`` in the same listing, whose
    answer arrived at ``own_answered``.

    The store stamped our write between our sending and the answer, so
    store time ``own_stamp`` is no later than ``own_answered`` here; the
    other write was sent before the store stamped it; the stamps'
    difference is exact to ``STAMP_RESOLUTION_SECONDS``. Pure.
    """
    lag = (other_stamp - own_stamp).total_seconds()
    return own_answered + lag + STAMP_RESOLUTION_SECONDS


def stamps_contradict(written: float, previous_seen_at: float) -> bool:
    """Whether ``written`` (from ``written_by``) puts a new version's write
    too long before ``previous_seen_at``, when a listing that began then
    still showed the previous version: the store's stamps are not
    consistent with each other (for example gateways with clocks apart)
    and must not be used. Pure."""
    return written < previous_seen_at - STAMP_TOLERANCE_SECONDS


class VersionWatch:
    """How long each watched lease object has shown the same ETag, on the
    watcher's monotonic clock.

    Example::

        watch = VersionWatch(ttl_seconds=15.0)
        watch.see("node-a", '"e1"', now=100.0)   # None: first sight
        watch.see("node-a", '"e1"', now=116.0)   # 16.0: unchanged for a TTL
        watch.is_stale("node-a", now=116.0)      # True: its holder has stopped

    First sight counts as a change, so a watcher that just started waits a
    TTL before calling anyone gone. A sighting may carry ``written_by``, an
    upper bound of when the version was written (see ``written_by``): the
    watch of that version then starts at the earlier of the two, each a
    time the write cannot have been sent after. Not thread-safe: one per
    caller, or under the caller's lock.
    """

    def __init__(self, ttl_seconds: float) -> None:
        self._ttl = ttl_seconds
        self._seen: dict[str, tuple[str, float]] = {}

    def see(
        self, key: str, etag: str | None, now: float, written_by: float | None = None
    ) -> float | None:
        """Record one sighting of ``key`` (``None``: the object is gone);
        return how long ``etag`` has been seen unchanged, or ``None`` when
        it is new to us (or gone). ``written_by``: the latest time this
        version can have been written, when known."""
        if etag is None:
            self._seen.pop(key, None)
            return None
        seen = self._seen.get(key)
        since = now if written_by is None else min(now, written_by)
        if seen is None or seen[0] != etag:
            self._seen[key] = (etag, since)
            return None
        if since < seen[1]:
            self._seen[key] = (etag, since)
        return now - min(since, seen[1])

    def observe(
        self, etags: Mapping[str, str], now: float, written_by: Mapping[str, float] | None = None
    ) -> None:
        """Record one listing: key -> ETag (and, for some keys, the latest
        time their version can have been written). Keys absent from the
        listing are forgotten (their object is gone)."""
        for key in [k for k in self._seen if k not in etags]:
            del self._seen[key]
        bounds = written_by or {}
        for key, etag in etags.items():
            self.see(key, etag, now, bounds.get(key))

    def forget(self, key: str) -> None:
        """Stop watching ``key`` (e.g. we hold it now)."""
        self._seen.pop(key, None)

    def etag(self, key: str) -> str | None:
        """The ETag last seen for ``key``."""
        seen = self._seen.get(key)
        return None if seen is None else seen[0]

    def unchanged_for(self, key: str, now: float) -> float | None:
        """Seconds the current ETag has been seen unchanged; ``None``: absent."""
        seen = self._seen.get(key)
        return None if seen is None else now - seen[1]

    def is_stale(self, key: str, now: float) -> bool:
        """Absent, or unchanged for a whole TTL: its holder has stopped."""
        unchanged = self.unchanged_for(key, now)
        return unchanged is None or unchanged >= self._ttl

    def next_stale_at(self, now: float, exclude: Collection[str] = ()) -> float | None:
        """When the first watched key that is not stale yet turns stale if
        it stays unchanged (``None``: none). A watcher that looks again
        then judges a stopped holder as early as the rules allow, instead
        of at its next regular look."""
        times = [
            since + self._ttl
            for key, (_etag, since) in self._seen.items()
            if key not in exclude and now - since < self._ttl
        ]
        return min(times, default=None)

    def live(self, now: float, released: Collection[str] = ()) -> list[str]:
        """Keys watched, not stale and not known released, sorted."""
        return sorted(k for k in self._seen if k not in released and not self.is_stale(k, now))
