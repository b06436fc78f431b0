"""The daemon's store contacts as they happen: the samples ``health`` judges.

Each job records the outcome of its kind of store contact (``control``,
``lease``, ``reports``, ``presence``, ``round``, ``renewal``, ``ticker``)
on the monotonic clock it is given; ``snapshot`` copies them out under the
lock for ``/healthz``; ``attempt`` makes one contact, records it and logs
a failure. ``HeartbeatWatch`` turns the failure counters of the
lease heartbeat and of the epoch ticker, which run on their own threads and
only count, into contacts.

Invariants: one lock guards the contacts; no store I/O of its own (only
the steps ``attempt`` is handed); the only clock is the injected monotonic
one.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal, TypeVar

from epochgc.errors import EpochGCError
from epochgc.gc.daemon.health import RENEWAL, Contact, record_failure, record_ok
from epochgc.leases.role_leases import LeaseManager
from epochgc.watermarks.ticker import EpochTicker

log = logging.getLogger(__name__)

T = TypeVar("T")


class _Failed(enum.Enum):
    FAILED = "failed"


FAILED: Final = _Failed.FAILED
"""What ``StoreContacts.attempt`` returns for a contact that failed."""


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

    def attempt(
        self, kind: str, step: Callable[[], T], failure: str
    ) -> T | Literal[_Failed.FAILED]:
        """Make one contact of ``kind`` (``step``) and record its outcome.

        A store error (``EpochGCError``) is logged as a WARNING, ``failure``
        with the error for its one ``%s``, and returns ``FAILED``: the job
        gives up until its next run. Anything else propagates, unrecorded.

        Example::

            read = contacts.attempt("reports", read_them, "could not read node reports: %s")
            if read is FAILED:
                return
        """
        try:
            result = step()
        except EpochGCError as err:
            self.record(kind, err)
            log.warning(failure, err)
            return FAILED
        self.record(kind)
        return result

    def forget(self, kind: str) -> None:
        """Drop ``kind``: nothing of ours makes that contact any more."""
        with self._lock:
            self._contacts.pop(kind, None)

    def snapshot(self) -> dict[str, Contact]:
        """A copy of every kind's latest outcome."""
        with self._lock:
            return dict(self._contacts)


@dataclass(eq=False)
class HeartbeatWatch:
    """Turns the lease heartbeat's and the ticker's failure counters into
    store contacts (the ``lease`` job samples it).

    Example::

        watch = HeartbeatWatch(leases, ticker, contacts)
        watch()     # ``renewal`` (and ``ticker`` while ticking) recorded
    """

    leases: LeaseManager
    ticker: EpochTicker | None
    contacts: StoreContacts
    _renew_failures_seen: int = field(default=0, init=False)
    _ticker_failures_seen: int = field(default=0, init=False)

    def __call__(self) -> None:
        """Record what the counters say since the last call."""
        failures = self.leases.stats["renew_failures"]
        if failures > self._renew_failures_seen:
            self.contacts.record(
                RENEWAL,
                f"{failures - self._renew_failures_seen} lease renewals failed since the last "
                "check (the daemon log has the errors)",
            )
        elif self.leases.held():
            self.contacts.record(RENEWAL)
        self._renew_failures_seen = failures
        ticker = self.ticker
        if ticker is not None and ticker.held:
            ticks_failed = ticker.failures
            if ticks_failed > self._ticker_failures_seen:
                self.contacts.record(
                    "ticker", "epoch ticks failing (the daemon log has the errors)"
                )
            else:
                self.contacts.record("ticker")
            self._ticker_failures_seen = ticks_failed
        else:
            self.contacts.forget("ticker")  # not ticking: nothing of ours fails
