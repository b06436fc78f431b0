"""When a node's next ownership round runs: at its interval, or just after
another node's lease would turn stale if that comes first."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochgc.reconciler.node import STALE_LOOK_DELAY, ownership_wait

times = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
intervals = st.floats(min_value=0.05, max_value=60.0)


@given(intervals, times)
def test_without_a_silent_node_the_round_waits_its_interval(interval: float, now: float) -> None:
    assert ownership_wait(interval, now, None) == interval


@given(intervals, times, st.floats(min_value=-60.0, max_value=120.0))
def test_a_node_due_to_turn_stale_is_looked_at_just_after(
    interval: float, now: float, ahead: float
) -> None:
    wait = ownership_wait(interval, now, now + ahead)
    assert STALE_LOOK_DELAY <= wait <= max(interval, STALE_LOOK_DELAY)
    if ahead + STALE_LOOK_DELAY < interval:
        # the early look comes after the moment, never before it
        assert now + wait >= now + ahead
        assert wait <= max(ahead, 0.0) + STALE_LOOK_DELAY + 1e-9
    else:
        assert wait == interval


def test_a_kill_is_judged_a_ttl_after_its_silence_was_first_seen() -> None:
    # TTL 15, rounds every 5: the dead node's last lease version was first
    # seen at 100; rounds at 103, 108, 113 would judge it at 118. The round
    # after 113 runs at 115.05 instead.
    assert ownership_wait(5.0, 113.0, 115.0) == 2.0 + STALE_LOOK_DELAY
