"""Pure lease decisions, lease policy checks, and the epoch cache."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.leases.core import AcquireDecision
from epochgc.leases.role_leases import LeaseDocument, decide_acquire
from epochgc.leases.timing import LeasePolicy
from epochgc.runtime import Runtime
from epochgc.watermarks.epoch import EpochCache
from tests.support.clocks import SetClock

NOW = datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC)


OTHERS = LeaseDocument("other", 3, NOW + timedelta(seconds=5))
MINE = LeaseDocument("me", 3, NOW + timedelta(seconds=5))
TTL = 15.0


@pytest.mark.parametrize(
    ("current", "holding", "unchanged_for", "decision"),
    [
        (None, False, None, AcquireDecision.CREATE),
        (OTHERS, False, None, AcquireDecision.WAIT),
        (OTHERS, False, TTL - 0.1, AcquireDecision.WAIT),
        (OTHERS, False, TTL, AcquireDecision.TAKE_OVER),
        # Its expires_at is not what decides, in either direction:
        (replace(OTHERS, expires_at=NOW - timedelta(hours=1)), False, 1.0, AcquireDecision.WAIT),
        (
            replace(OTHERS, expires_at=NOW + timedelta(hours=1)),
            False,
            TTL,
            AcquireDecision.TAKE_OVER,
        ),
        (replace(OTHERS, released=True), False, None, AcquireDecision.TAKE_OVER),
        (MINE, True, None, AcquireDecision.RENEW),
        (MINE, False, None, AcquireDecision.TAKE_OVER),
    ],
)
def test_decide_acquire(
    current: LeaseDocument | None,
    holding: bool,
    unchanged_for: float | None,
    decision: AcquireDecision,
) -> None:
    assert (
        decide_acquire(current, "me", holding=holding, unchanged_for=unchanged_for, ttl_seconds=TTL)
        is decision
    )


@given(
    holder=st.sampled_from(["me", "other"]),
    released=st.booleans(),
    holding=st.booleans(),
    unchanged_for=st.none() | st.floats(min_value=0, max_value=10 * TTL),
    skew_hours=st.integers(min_value=-48, max_value=48),
)
def test_no_take_over_of_a_live_holder_whatever_its_clock(
    holder: str, released: bool, holding: bool, unchanged_for: float | None, skew_hours: int
) -> None:
    """Someone else's unreleased lease is taken only after a whole TTL
    unchanged; its expires_at (any skew) never matters."""
    doc = LeaseDocument(holder, 3, NOW + timedelta(hours=skew_hours), released=released)
    decision = decide_acquire(
        doc, "me", holding=holding, unchanged_for=unchanged_for, ttl_seconds=TTL
    )
    if holder == "other" and not released:
        expected_take = unchanged_for is not None and unchanged_for >= TTL
        assert (decision is AcquireDecision.TAKE_OVER) is expected_take
    assert decision is not AcquireDecision.CREATE


def test_lease_policy_refuses_timings_that_lose_healthy_leases() -> None:
    with pytest.raises(ValueError, match="renew"):
        LeasePolicy(ttl_seconds=5, renew_interval_seconds=4, skew_margin_seconds=2)
    LeasePolicy(ttl_seconds=15, renew_interval_seconds=5, skew_margin_seconds=2)


def test_epoch_cache_reuses_within_ttl_and_never_goes_backwards() -> None:
    clock = SetClock(0.0)
    values = iter([5, 7, 6, 9])
    cache = EpochCache(lambda: next(values), ttl_seconds=30, runtime=Runtime(monotonic=clock))
    assert cache.get() == 5
    clock.at = 29
    assert cache.get() == 5
    clock.at = 31
    assert cache.get() == 7
    clock.at = 62
    assert cache.get() == 7, "a lower reading (6) never replaces a higher one"
    assert cache.refreshes == 3


def test_epoch_cache_invalidate_below() -> None:
    clock = SetClock(0.0)
    values = iter([5, 8, 9])
    cache = EpochCache(lambda: next(values), ttl_seconds=30, runtime=Runtime(monotonic=clock))
    assert cache.get() == 5
    cache.invalidate(below=5)
    assert cache.get() == 5, "5 is not below 5: kept"
    cache.invalidate(below=6)
    assert cache.get() == 8, "stale value dropped, read afresh"
    cache.invalidate()
    assert cache.get() == 9
