"""When a node's next ownership round runs (``ownership/pacing``):
at its interval after the last regular round, or just after another node's
lease would turn stale if that comes first, at the node's point of a window
as wide as the cluster needs, without moving the regular rounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.ownership.pacing import (
    LOOKS_PER_SECOND,
    STALE_LOOK_DELAY,
    OwnershipPacing,
    look_window,
    stale_look_fraction,
)

times = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
intervals = st.floats(min_value=0.05, max_value=60.0)
fractions = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
node_counts = st.integers(min_value=0, max_value=5000)


@given(intervals, times, st.lists(st.floats(min_value=0.0, max_value=10.0), max_size=20))
def test_without_a_silent_node_a_round_follows_the_last_by_its_interval(
    interval: float, now: float, durations: list[float]
) -> None:
    pacing = OwnershipPacing(interval)
    for took in durations:
        assert pacing.after_round(now, None, 1000) == pytest.approx(interval)
        now += interval + took


@given(intervals, times, st.floats(min_value=-60.0, max_value=120.0), fractions, node_counts)
def test_a_node_due_to_turn_stale_is_looked_at_after_the_moment_never_before(
    interval: float, now: float, ahead: float, fraction: float, nodes: int
) -> None:
    wait = OwnershipPacing(interval, fraction).after_round(now, now + ahead, nodes)
    look = ahead + STALE_LOOK_DELAY + fraction * look_window(nodes)
    if max(look, STALE_LOOK_DELAY) < interval:
        assert look - 1e-6 <= wait <= max(look, STALE_LOOK_DELAY) + 1e-6
    else:
        assert wait == pytest.approx(interval)


def test_an_early_look_keeps_the_regular_rounds_where_they_were() -> None:
    # Rounds every 5 s, the last regular one ended at 100: the next is due
    # at 105. A silent node turns stale at 102: a node half-way through the
    # window of 120 nodes (0.3 s) looks at 102.2; that round ends at 102.5,
    # and the next is still the regular one at 105, then every 5 s from its end.
    pacing = OwnershipPacing(5.0, fraction=0.5)
    assert pacing.after_round(100.0, 102.0, 120) == pytest.approx(2.2)
    assert pacing.after_round(102.5, None, 120) == pytest.approx(2.5)
    assert pacing.after_round(105.2, None, 120) == 5.0


def test_an_early_look_that_overran_the_regular_round_runs_it_at_once() -> None:
    pacing = OwnershipPacing(5.0)
    pacing.after_round(100.0, 101.0)
    assert pacing.after_round(106.0, None) == 0.0
    assert pacing.after_round(106.1, None) == 5.0


def test_a_kill_is_judged_a_ttl_after_its_last_renewal_not_at_the_next_round() -> None:
    # TTL 15, rounds every 5: the dead node's last version dates from 100
    # (the store's stamps); regular rounds at 103, 108, 113 would judge it
    # at 118. The round after 113 runs at 115.05 instead.
    pacing = OwnershipPacing(5.0)
    assert pacing.after_round(113.0, 115.0) == pytest.approx(2.0 + STALE_LOOK_DELAY)


def test_the_window_holds_a_few_hundred_looks_a_second() -> None:
    assert look_window(20) == pytest.approx(0.05)
    assert look_window(1000) == pytest.approx(2.5)
    assert 1000 / look_window(1000) == LOOKS_PER_SECOND


@given(st.text(max_size=20))
def test_a_node_has_one_stable_point_in_the_window(node: str) -> None:
    assert 0.0 <= stale_look_fraction(node) < 1.0
    assert stale_look_fraction(node) == stale_look_fraction(node)


def test_a_thousand_nodes_spread_their_early_looks_over_the_window() -> None:
    """Every survivor computes the same moment from the store's stamps:
    their looks must not all land in one instant."""
    share = [stale_look_fraction(f"reconciler-{i:04d}") for i in range(1000)]
    tenths = [sum(1 for s in share if k / 10 <= s < (k + 1) / 10) for k in range(10)]
    assert min(tenths) >= 70 and max(tenths) <= 130
