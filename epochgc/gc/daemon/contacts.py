"""The daemon's store contacts as they happen: the samples ``health`` judges.

Each job records the outcome of its kind of store contact (``control``,
``lease``, ``reports``, ``presence``, ``round``, ``renewal``, ``ticker``)
on the monotonic clock it is given; ``snapshot`` copies them out under the
lock for ``/healthz``. ``HeartbeatWatch`` turns the failure counters of the
lease heartbeat and of the epoch ticker, which run on their own threads and
only count, into contacts.

Invariants: one lock guards the contacts; no store I/O; the only clock is
the injected monotonic one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from epochgc.errors import EpochGCError
from epochgc.gc.daemon.health import RENEWAL, Contact, record_failure, record_ok
from epochgc.leases.role_leases import LeaseManager
from epochgc.watermarks.ticker import EpochTicker


class StoreContacts:
    """The latest outcome of each kind of store contact, thread-safe.

    Example::

        contacts = StoreContacts(time.monotonic)
        contacts.record("control")                       # it succeeded
        contacts.record("reports", err)                  # it failed with err
        contacts.snapshot()["reports"].failing_since     # when the failures began
    """

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._contacts: dict[str, Contact] = {}
        self._lock = threading.Lock()

    def record(self, kind: str, error: EpochGCError | str | None = None) -> None:
        """Record the outcome of one contact of ``kind`` (``None``: it
        succeeded; an exception is named with its type)."""
        now = self._monotonic()
        with self._lock:
            current = self._contacts.get(kind, Contact())
            self._contacts[kind] = (
                record_ok(current, now)
                if error is None
                else record_failure(
                    current,
                    now,
                    f"{type(error).__name__}: {error}"
                    if isinstance(error, EpochGCError)
                    else error,
                )
            )

    def forget(self, kind: str) -> None:
        """Drop ``kind``: nothing of ours makes that contact any more."""
        with self._lock:
            self._contacts.pop(kind, None)

    def snapshot(self) -> dict[str, Contact]:
        """A copy of every kind's latest outcome."""
        with self._lock:
            return dict(self._contacts)


class HeartbeatWatch:
    """Turns the lease heartbeat's and the ticker's failure counters into
    store contacts (the ``lease`` job samples it).

    Example::

        watch = HeartbeatWatch(leases, ticker, contacts)
        watch()     # ``renewal`` (and ``ticker`` while ticking) recorded
    """

    def __init__(
        self, leases: LeaseManager, ticker: EpochTicker | None, contacts: StoreContacts
    ) -> None:
        self._leases = leases
        self._ticker = ticker
        self._contacts = contacts
        self._renew_failures_seen = 0
        self._ticker_failures_seen = 0

    def __call__(self) -> None:
        """Record what the counters say since the last call."""
        failures = self._leases.stats["renew_failures"]
        if failures > self._renew_failures_seen:
            self._contacts.record(
                RENEWAL,
                f"{failures - self._renew_failures_seen} lease renewals failed since the last "
                "check (the daemon log has the errors)",
            )
        elif self._leases.held():
            self._contacts.record(RENEWAL)
        self._renew_failures_seen = failures
        ticker = self._ticker
        if ticker is not None and ticker.held:
            ticks_failed = ticker.failures
            if ticks_failed > self._ticker_failures_seen:
                self._contacts.record(
                    "ticker", "epoch ticks failing (the daemon log has the errors)"
                )
            else:
                self._contacts.record("ticker")
            self._ticker_failures_seen = ticks_failed
        else:
            self._contacts.forget("ticker")  # not ticking: nothing of ours fails
