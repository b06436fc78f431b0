"""``gc spark``'s time breakdown (``PhaseTimes``): phases in the order they
ran, what each did, and a total that covers them."""

from __future__ import annotations

import itertools

import pytest

from epochgc.gc.spark.phase_times import PhaseTimes


def _ticking() -> PhaseTimes:
    """A clock that moves 1.5 s at every reading."""
    ticks = itertools.count(step=1.5)
    return PhaseTimes(clock=lambda: next(ticks))


def test_the_line_says_each_phase_in_order_with_its_note_then_the_total() -> None:
    times = _ticking()  # made at 0
    with times.phase("package", "environment reused from the cache"):  # 1.5 -> 3
        pass
    with times.phase("spark_start"):  # 4.5 -> 6
        pass
    times.note("spark_start", "local[2]")
    assert times.line() == (
        "time: package 1.5s (environment reused from the cache), spark start 1.5s (local[2]); "
        "total 7.5s"
    )


def test_a_phase_that_raises_is_counted_and_repeats_add_up() -> None:
    times = _ticking()
    with pytest.raises(RuntimeError), times.phase("delete"):
        raise RuntimeError("job aborted")
    with times.phase("delete"):
        pass
    assert times.as_json() == {"delete": 3.0, "total": 7.5}
