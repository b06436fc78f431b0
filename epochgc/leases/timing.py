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
* a released lease is free at once (the caller knows from the body).

The "stored bytes are ours" rule for conditional writes lives in
``storage/conditional_put.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass


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


class VersionWatch:
    """How long each watched lease object has shown the same ETag, on the
    watcher's monotonic clock.

    Example::

        watch = VersionWatch(ttl_seconds=15.0)
        watch.see("node-a", '"e1"', now=100.0)   # None: first sight
        watch.see("node-a", '"e1"', now=116.0)   # 16.0: unchanged for a TTL
        watch.is_stale("node-a", now=116.0)      # True: its holder has stopped

    First sight counts as a change, so a watcher that just started waits a
    TTL before calling anyone gone. Not thread-safe: one per caller, or
    under the caller's lock.
    """

    def __init__(self, ttl_seconds: float) -> None:
        self._ttl = ttl_seconds
        self._seen: dict[str, tuple[str, float]] = {}

    def see(self, key: str, etag: str | None, now: float) -> float | None:
        """Record one sighting of ``key`` (``None``: the object is gone);
        return how long ``etag`` has been seen unchanged, or ``None`` when
        it is new to us (or gone)."""
        if etag is None:
            self._seen.pop(key, None)
            return None
        seen = self._seen.get(key)
        if seen is None or seen[0] != etag:
            self._seen[key] = (etag, now)
            return None
        return now - seen[1]

    def observe(self, etags: Mapping[str, str], now: float) -> None:
        """Record one listing: key -> ETag. Keys absent from the listing are
        forgotten (their object is gone)."""
        for key in [k for k in self._seen if k not in etags]:
            del self._seen[key]
        for key, etag in etags.items():
            self.see(key, etag, now)

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
