"""The progress watchdog: which loop has stopped completing rounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.reconciler.watchdog import LoopStall, ProgressWatchdog, describe_error


def test_a_loop_that_completes_rounds_within_its_bound_is_never_judged() -> None:
    dog = ProgressWatchdog(10.0)
    dog.watch("rounds", 0.0, allowance_seconds=1.0)
    for now in range(1, 100, 5):
        dog.completed("rounds", float(now))
        assert dog.check(float(now) + 10.9) is None


def test_an_overdue_loop_is_named_with_how_long_and_the_setting() -> None:
    dog = ProgressWatchdog(60.0, bound_name="reconciler.max_round_seconds")
    dog.watch("rounds", 0.0, allowance_seconds=1.0)
    dog.watch("ownership", 0.0, allowance_seconds=5.0)
    dog.completed("ownership", 50.0)
    assert dog.check(61.0) is None, "the bound plus the pause between rounds"
    stall = dog.check(61.5)
    assert stall is not None and stall.loop == "rounds" and stall.error is None
    assert stall.describe() == (
        "loop rounds stopped: no round completed for 61.50s "
        "(reconciler.max_round_seconds = 60s, plus 1s between rounds)"
    )


def test_a_death_is_judged_at_once_and_names_the_exception() -> None:
    dog = ProgressWatchdog(60.0)
    dog.watch("ownership", 0.0)
    error = KeyError("orders")
    dog.died("ownership", error, 1.0)
    stall = dog.check(1.0)
    assert stall == LoopStall("ownership", "KeyError: 'orders'", error)


def test_the_first_verdict_stays_whatever_comes_after() -> None:
    # Once judged, the node has stopped renewing and may own nothing any
    # more: a late round must not make it look alive again.
    dog = ProgressWatchdog(1.0)
    dog.watch("rounds", 0.0)
    first = dog.check(2.0)
    assert first is not None
    dog.completed("rounds", 2.5)
    dog.died("ownership", RuntimeError("later"), 3.0)
    dog.unwatch("rounds")
    assert dog.check(3.0) == first


def test_an_unwatched_loop_is_not_judged() -> None:
    dog = ProgressWatchdog(1.0)
    dog.watch("rounds", 0.0)
    dog.unwatch("rounds")
    dog.completed("rounds", 0.5)  # a round reported after: ignored
    assert dog.check(100.0) is None


def test_error_descriptions_are_one_line() -> None:
    assert describe_error(RuntimeError("two\nlines")) == "RuntimeError: two lines"
    assert describe_error(TimeoutError()) == "TimeoutError"


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="bound_seconds"):
        ProgressWatchdog(0.0)


_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["completed", "died", "check"]),
        st.sampled_from(["rounds", "ownership"]),
        st.floats(min_value=0.0, max_value=5.0),
    ),
    max_size=40,
)


@settings(max_examples=200)
@given(
    bound=st.floats(min_value=0.1, max_value=10.0),
    allowance=st.floats(min_value=0.0, max_value=2.0),
    events=_EVENTS,
)
def test_the_verdict_is_exactly_a_death_or_a_loop_past_its_bound(
    bound: float, allowance: float, events: list[tuple[str, str, float]]
) -> None:
    """Model: a verdict appears the first time a loop died or a check finds
    one whose last completed round is more than bound + allowance ago; it
    never changes afterwards."""
    dog = ProgressWatchdog(bound)
    now = 0.0
    last = {"rounds": now, "ownership": now}
    for loop in last:
        dog.watch(loop, now, allowance_seconds=allowance)
    expected: LoopStall | None = None
    for kind, loop, step in events:
        now += step
        if kind == "completed":
            dog.completed(loop, now)
            if expected is None:
                last[loop] = now
        elif kind == "died":
            error = RuntimeError(loop)
            dog.died(loop, error, now)
            expected = expected or LoopStall(loop, f"RuntimeError: {loop}", error)
        else:
            verdict = dog.check(now)
            if expected is None:
                # The product's own subtraction order: at the float boundary
                # (now - at == bound + allowance to the last bit) the two
                # orders can round differently, and either verdict is right.
                late = [n for n, at in last.items() if now - at - bound - allowance > 0]
                assert (verdict is None) == (not late)
                if verdict is not None:
                    assert verdict.loop in late and verdict.error is None
                    expected = verdict
            assert verdict == expected
