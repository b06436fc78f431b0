"""The daemon's store contacts as they happen, and the heartbeat counters
turned into contacts."""

from __future__ import annotations

from dataclasses import dataclass, field

from epochgc.errors import StorageError
from epochgc.gc.daemon.contacts import HeartbeatWatch, StoreContacts
from epochgc.gc.daemon.health import RENEWAL, Contact
from tests.support.clocks import SetClock


def test_contacts_are_timed_on_the_clock_they_are_given() -> None:
    clock = SetClock(100.0)
    contacts = StoreContacts(clock)
    contacts.record("control")
    clock.at = 105.0
    contacts.record("reports", StorageError("bucket gone"))
    clock.at = 107.0
    contacts.record("reports", "still gone")
    assert contacts.snapshot() == {
        "control": Contact(last_ok_at=100.0),
        "reports": Contact(failing_since=105.0, last_error="still gone"),
    }
    contacts.record("reports", StorageError("bucket gone"))
    assert contacts.snapshot()["reports"].last_error == "StorageError: bucket gone"
    contacts.forget("reports")
    assert set(contacts.snapshot()) == {"control"}


def test_a_snapshot_is_a_copy() -> None:
    contacts = StoreContacts(SetClock(100.0))
    snapshot = contacts.snapshot()
    contacts.record("lease")
    assert snapshot == {}


@dataclass
class Leases:
    stats: dict[str, int] = field(default_factory=lambda: {"renew_failures": 0})
    holding: bool = True

    def held(self) -> bool:
        return self.holding


@dataclass
class Ticker:
    held: bool = True
    failures: int = 0


def test_renewal_failures_since_the_last_sample_make_the_renewal_contact_fail() -> None:
    leases, ticker, contacts = Leases(), Ticker(), StoreContacts(SetClock(100.0))
    watch = HeartbeatWatch(leases, ticker, contacts)
    watch()
    assert contacts.snapshot()[RENEWAL].failing_since is None
    leases.stats["renew_failures"] = 2
    ticker.failures = 1
    watch()
    now = contacts.snapshot()
    assert now[RENEWAL].last_error.startswith("2 lease renewals failed since the last check")
    assert now["ticker"].last_error.startswith("epoch ticks failing")
    watch()  # no new failures: both recover
    assert contacts.snapshot()[RENEWAL].failing_since is None
    assert contacts.snapshot()["ticker"].failing_since is None


def test_a_daemon_that_does_not_tick_has_no_ticker_contact() -> None:
    ticker, contacts = Ticker(), StoreContacts(SetClock(100.0))
    watch = HeartbeatWatch(Leases(), ticker, contacts)
    watch()
    assert "ticker" in contacts.snapshot()
    ticker.held = False
    watch()
    assert "ticker" not in contacts.snapshot()
    HeartbeatWatch(Leases(), None, contacts)()
    assert "ticker" not in contacts.snapshot()
