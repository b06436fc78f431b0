"""Lease timing (``leases.timing``): the policy's validation and the
holder's own deadline, and the watcher's same-ETag-for-a-TTL rule
(``VersionWatch``) on explicit monotonic times. The liveness walk-through
and ``next_stale_at`` property are in ``test_assignment.py``."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from epochgc.leases.timing import (
    STAMP_RESOLUTION_SECONDS,
    STAMP_TOLERANCE_SECONDS,
    LeasePolicy,
    VersionWatch,
    stamps_checkable,
    stamps_contradict,
    written_by,
)

TTL = 15.0
times = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
durations = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


# --- LeasePolicy ---------------------------------------------------------------


def test_the_default_policy_is_valid_and_leaves_time_for_two_missed_heartbeats() -> None:
    policy = LeasePolicy()
    budget = policy.ttl_seconds - policy.skew_margin_seconds
    assert budget > 2 * policy.renew_interval_seconds


@pytest.mark.parametrize(
    ("ttl", "renew", "skew"),
    [(0.0, 1.0, 0.0), (-1.0, 1.0, 0.0), (15.0, 0.0, 2.0), (15.0, -5.0, 2.0)],
)
def test_a_ttl_or_renew_interval_not_above_0_is_refused(
    ttl: float, renew: float, skew: float
) -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        LeasePolicy(ttl, renew, skew)


@pytest.mark.parametrize(("renew", "skew"), [(13.0, 2.0), (14.0, 2.0), (5.0, 10.0), (15.0, 0.0)])
def test_a_holder_that_would_lose_its_lease_between_heartbeats_is_refused(
    renew: float, skew: float
) -> None:
    with pytest.raises(ValueError, match="must be below ttl_seconds"):
        LeasePolicy(TTL, renew, skew)


def test_a_renew_interval_just_inside_the_ttl_budget_is_accepted() -> None:
    assert LeasePolicy(TTL, 12.9, 2.0).renew_interval_seconds == 12.9


@given(
    st.floats(min_value=1.0, max_value=3600.0),
    st.floats(min_value=0.0, max_value=0.45),
    st.floats(min_value=0.01, max_value=0.45),
    times,
)
def test_a_grant_is_valid_until_a_ttl_less_the_skew_margin_after_it_was_sent(
    ttl: float, skew_share: float, renew_share: float, sent: float
) -> None:
    policy = LeasePolicy(ttl, renew_share * ttl, skew_share * ttl)
    until = policy.valid_until(sent)
    assert until == sent + ttl - policy.skew_margin_seconds
    assert sent < until <= sent + ttl, "a holder stops before anyone else may take over"
    assert until > sent + policy.renew_interval_seconds, "one renewal comes in time"


# --- VersionWatch ----------------------------------------------------------------


def test_a_key_never_seen_is_absent_and_stale() -> None:
    watch = VersionWatch(TTL)
    assert watch.etag("a") is None
    assert watch.unchanged_for("a", 100.0) is None
    assert watch.is_stale("a", 100.0)
    assert watch.next_stale_at(100.0) is None
    assert watch.live(100.0) == []


@given(times, durations)
@example(100.0, TTL)  # the boundary: stale at exactly a TTL
def test_an_unchanged_etag_is_stale_exactly_from_a_ttl_after_first_sight(
    first: float, later: float
) -> None:
    watch = VersionWatch(TTL)
    assert watch.see("a", "e1", first) is None
    now = first + later
    unchanged = now - first
    assert watch.see("a", "e1", now) == unchanged
    assert watch.unchanged_for("a", now) == unchanged
    assert watch.is_stale("a", now) == (unchanged >= TTL)
    assert watch.live(now) == ([] if unchanged >= TTL else ["a"])


@given(times, st.lists(st.tuples(st.sampled_from(["e1", "e2"]), durations), max_size=12))
def test_the_watch_restarts_at_every_new_etag_and_only_then(
    start: float, sightings: list[tuple[str, float]]
) -> None:
    watch = VersionWatch(TTL)
    now = start
    watch.see("a", "e0", now)
    since = now
    for etag, step in sightings:
        now += step
        changed = etag != watch.etag("a")
        got = watch.see("a", etag, now)
        if changed:
            since = now
            assert got is None
        else:
            assert got == now - since
        assert watch.etag("a") == etag
        assert watch.unchanged_for("a", now) == now - since


def test_a_key_seen_gone_is_forgotten_and_a_return_is_a_first_sight() -> None:
    watch = VersionWatch(TTL)
    watch.see("a", "e1", 100.0)
    assert watch.see("a", None, 110.0) is None
    assert watch.etag("a") is None and watch.is_stale("a", 110.0)
    assert watch.see("a", "e1", 120.0) is None, "the same ETag back counts as new"
    assert not watch.is_stale("a", 134.9)


def test_a_listing_forgets_absent_keys_and_keeps_unchanged_ones_watching() -> None:
    watch = VersionWatch(TTL)
    watch.observe({"a": "e1", "b": "e1", "c": "e1"}, now=100.0)
    watch.observe({"a": "e1", "c": "e2"}, now=110.0)
    assert watch.etag("b") is None
    assert watch.unchanged_for("a", 110.0) == 10.0, "an unchanged key is not restarted"
    assert watch.unchanged_for("c", 110.0) == 0.0, "a changed key restarts"
    watch.observe({}, now=120.0)
    assert watch.live(120.0) == []


def test_forgetting_one_key_leaves_the_others_and_forgetting_twice_is_harmless() -> None:
    watch = VersionWatch(TTL)
    watch.observe({"me": "e1", "b": "e1"}, now=100.0)
    watch.forget("me")
    watch.forget("me")
    assert watch.etag("me") is None and watch.etag("b") == "e1"
    assert watch.live(101.0) == ["b"]


def test_the_next_stale_moment_ignores_excluded_and_already_stale_keys() -> None:
    watch = VersionWatch(TTL)
    watch.see("old", "e1", 0.0)
    watch.see("me", "e1", 5.0)
    watch.see("b", "e1", 8.0)
    watch.see("c", "e1", 9.0)
    now = 16.0  # "old" is stale already
    assert watch.next_stale_at(now) == 5.0 + TTL
    assert watch.next_stale_at(now, exclude=["me"]) == 8.0 + TTL
    assert watch.next_stale_at(now, exclude=["me", "b", "c"]) is None


@given(st.dictionaries(st.sampled_from("abcdefg"), durations, max_size=7), durations)
def test_live_keys_are_sorted_and_exactly_those_neither_stale_nor_released(
    first_seen: dict[str, float], now: float
) -> None:
    watch = VersionWatch(TTL)
    for key, at in first_seen.items():
        watch.see(key, "e1", at)
    released = {"a", "b"}
    live = watch.live(now, released=released)
    assert live == sorted(live)
    assert set(live) == {k for k, at in first_seen.items() if k not in released and now - at < TTL}


# --- the store's stamps (written_by, stamps_contradict) -------------------------------


def _listed(store_seconds: float, *, rounded: bool) -> datetime:
    """A stamp as a listing shows it: whole seconds, truncated or rounded."""
    whole = round(store_seconds) if rounded else math.floor(store_seconds)
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=whole)


@given(
    own_sent=st.floats(min_value=0.0, max_value=1e5),
    own_stamped_after=st.floats(min_value=0.0, max_value=5.0),
    own_answered_after=st.floats(min_value=0.0, max_value=5.0),
    other_sent=st.floats(min_value=0.0, max_value=1e5),
    other_stamped_after=st.floats(min_value=0.0, max_value=5.0),
    monotonic_offset=st.floats(min_value=-1e6, max_value=1e6),
    store_offset=st.floats(min_value=0.0, max_value=1e7),
    rounded=st.booleans(),
)
@example(0.0, 0.0, 0.0, 0.999, 0.0, 0.0, 0.0, False)
@example(0.0, 0.999, 0.0, 0.0, 0.0, 0.0, 0.5, True)
def test_the_store_stamps_never_put_a_write_later_than_it_can_have_been_sent(
    own_sent: float,
    own_stamped_after: float,
    own_answered_after: float,
    other_sent: float,
    other_stamped_after: float,
    monotonic_offset: float,
    store_offset: float,
    rounded: bool,
) -> None:
    """Real time, this process's monotonic clock and the store's clock each
    run from their own origin: a watch started at ``written_by`` starts no
    earlier than the other write was sent, whatever the latencies, the
    origins and the stamps' truncation or rounding."""
    own_stamp = own_sent + own_stamped_after
    own_answered = own_stamp + own_answered_after
    other_stamp = other_sent + other_stamped_after
    bound = written_by(
        own_answered + monotonic_offset,
        _listed(own_stamp + store_offset, rounded=rounded),
        _listed(other_stamp + store_offset, rounded=rounded),
    )
    assert bound >= other_sent + monotonic_offset - 1e-6


@given(
    previous_seen=st.floats(min_value=0.0, max_value=1e5),
    written_after=st.floats(min_value=0.0, max_value=10.0),
    at_store=st.floats(min_value=0.0, max_value=1.0),
    stamp_error=st.floats(min_value=-1.0, max_value=1.0, exclude_min=True, exclude_max=True),
)
def test_consistent_stamps_never_look_contradictory(
    previous_seen: float, written_after: float, at_store: float, stamp_error: float
) -> None:
    """A write committed after a listing that began at ``previous_seen``
    showed the previous version: stamped at most a second (its time at the
    store) before its commit and off by less than the resolution, the bound
    derived from it is not taken for a contradiction."""
    committed = previous_seen + written_after
    bound = committed - at_store + stamp_error + STAMP_RESOLUTION_SECONDS
    assert not stamps_contradict(bound, previous_seen)


def test_stamps_far_older_than_a_listing_that_showed_the_previous_version_contradict() -> None:
    assert stamps_contradict(100.0 - STAMP_TOLERANCE_SECONDS - 0.01, 100.0)
    assert not stamps_contradict(100.0 - STAMP_TOLERANCE_SECONDS, 100.0)


def test_a_watch_starts_a_version_at_the_earlier_of_sight_and_written_by() -> None:
    watch = VersionWatch(TTL)
    watch.see("a", '"e1"', now=100.0)
    assert watch.see("a", '"e2"', now=110.0, written_by=106.0) is None
    assert watch.unchanged_for("a", now=110.0) == 4.0
    assert not watch.is_stale("a", now=120.9) and watch.is_stale("a", now=121.0)
    assert watch.next_stale_at(now=110.0) == 121.0
    # a later, looser bound never moves the start later; a tighter one does
    assert watch.see("a", '"e2"', now=112.0, written_by=109.0) == 6.0
    assert watch.see("a", '"e2"', now=113.0, written_by=105.5) == 7.5
    # a bound after the sighting counts as the sighting
    watch.see("b", '"f1"', now=50.0, written_by=80.0)
    assert watch.unchanged_for("b", now=60.0) == 10.0


@given(times, durations, durations, st.floats(min_value=-100.0, max_value=100.0))
def test_a_watch_never_calls_a_version_stale_a_ttl_before_its_write_or_sighting(
    seen: float, after: float, later: float, bound_shift: float
) -> None:
    watch = VersionWatch(TTL)
    watch.see("a", '"e0"', now=seen)
    bound = seen + after + bound_shift
    watch.see("a", '"e1"', now=seen + after, written_by=bound)
    now = seen + after + later
    if watch.is_stale("a", now):
        assert now - min(seen + after, bound) >= TTL


def test_stamps_are_checkable_only_against_a_recent_listing() -> None:
    ttl = 15.0
    assert stamps_checkable(105.0, 100.0, ttl)
    assert stamps_checkable(107.5, 100.0, ttl)
    assert not stamps_checkable(107.6, 100.0, ttl)
    assert not stamps_checkable(130.0, 100.0, ttl)
