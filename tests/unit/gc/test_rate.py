"""The delete-rate controller and how a cluster-wide limit is shared out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.rate import RateController, task_rate_share
from tests.support.clocks import SetClock


def test_a_throttle_never_raises_the_rate_above_the_hard_limit() -> None:
    """With a limit below ``min_rate`` a SlowDown must not lift the rate to
    ``min_rate`` (it did: 20 keys/s became 100)."""
    rate = RateController(20.0, clock=SetClock(0.0))
    rate.on_throttle()
    assert rate.rate is not None and rate.rate <= 20.0


@given(
    limit=st.floats(min_value=1.0, max_value=5000.0),
    batches=st.lists(st.integers(min_value=1, max_value=1000), min_size=1, max_size=40),
)
def test_keys_sent_by_any_time_never_exceed_the_limit_times_the_elapsed_time(
    limit: float, batches: list[int]
) -> None:
    """Each batch waits until it is paid for, so from the first reservation
    on, the keys sent by time t are at most ``limit * t`` (no free first
    burst: k tasks must not send k bursts at once)."""
    clock = SetClock(0.0)
    rate = RateController(limit, clock=clock)
    sent = 0
    for keys in batches:
        clock.at += rate.reserve(keys)
        sent += keys
        assert sent <= limit * clock.at + 1e-6 * sent


@given(
    # 0 (no limit) or what the config accepts (>= 0.001: a subnormal limit
    # shared out underflowed to a share of 0.0, found by this test).
    limit=st.just(0.0) | st.floats(min_value=0.001, max_value=10_000.0),
    tasks=st.integers(min_value=0, max_value=5000),
    slots=st.integers(min_value=0, max_value=512),
)
def test_the_shares_of_the_tasks_that_run_at_once_add_up_to_the_limit(
    limit: float, tasks: int, slots: int
) -> None:
    share = task_rate_share(limit, tasks, slots)
    if limit <= 0:
        assert share is None
        return
    assert share is not None and share > 0
    at_once = max(1, min(tasks, slots))
    assert abs(share * at_once - limit) <= 1e-9 * limit
