"""Pure lease decisions, lease policy checks, and the epoch cache."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from epochgc.watermarks.epoch import EpochCache
from epochgc.watermarks.leases import (
    AcquireDecision,
    LeaseDocument,
    LeasePolicy,
    decide_acquire,
)

NOW = datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("current", "decision"),
    [
        (None, AcquireDecision.CREATE),
        (LeaseDocument("other", 3, NOW + timedelta(seconds=5)), AcquireDecision.WAIT),
        (LeaseDocument("other", 3, NOW), AcquireDecision.TAKE_OVER),
        (LeaseDocument("other", 3, NOW - timedelta(seconds=1)), AcquireDecision.TAKE_OVER),
        (LeaseDocument("me", 3, NOW + timedelta(seconds=5)), AcquireDecision.RENEW),
        (LeaseDocument("me", 3, NOW - timedelta(seconds=5)), AcquireDecision.TAKE_OVER),
    ],
)
def test_decide_acquire(current: LeaseDocument | None, decision: AcquireDecision) -> None:
    assert decide_acquire(current, "me", NOW) is decision


def test_lease_policy_refuses_timings_that_lose_healthy_leases() -> None:
    with pytest.raises(ValueError, match="renew"):
        LeasePolicy(ttl_seconds=5, renew_interval_seconds=4, skew_margin_seconds=2)
    LeasePolicy(ttl_seconds=15, renew_interval_seconds=5, skew_margin_seconds=2)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_epoch_cache_reuses_within_ttl_and_never_goes_backwards() -> None:
    clock = FakeClock()
    values = iter([5, 7, 6, 9])
    cache = EpochCache(lambda: next(values), ttl_seconds=30, clock=clock)
    assert cache.get() == 5
    clock.t = 29
    assert cache.get() == 5
    clock.t = 31
    assert cache.get() == 7
    clock.t = 62
    assert cache.get() == 7, "a lower reading (6) never replaces a higher one"
    assert cache.refreshes == 3


def test_epoch_cache_invalidate_below() -> None:
    clock = FakeClock()
    values = iter([5, 8, 9])
    cache = EpochCache(lambda: next(values), ttl_seconds=30, clock=clock)
    assert cache.get() == 5
    cache.invalidate(below=5)
    assert cache.get() == 5, "5 is not below 5: kept"
    cache.invalidate(below=6)
    assert cache.get() == 8, "stale value dropped, read afresh"
    cache.invalidate()
    assert cache.get() == 9
