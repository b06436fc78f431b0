"""The seen epoch window's arithmetic (``watermarks.partition.window``) as
properties: classification, sliding forward only, size and the invariant
``previous <= max``. The worked ``[5, 6]`` example is in ``test_fence.py``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.watermarks.partition.window import EpochWindow, Position

epochs = st.integers(min_value=0, max_value=10**12)


@st.composite
def windows(draw: st.DrawFn) -> EpochWindow:
    previous = draw(epochs)
    return EpochWindow(previous, previous + draw(st.integers(min_value=0, max_value=1000)))


@given(windows(), st.integers(min_value=-10, max_value=10**12 + 2000))
def test_every_epoch_is_below_inside_or_above_by_the_inclusive_bounds(
    window: EpochWindow, epoch: int
) -> None:
    expected = (
        Position.BELOW
        if epoch < window.previous
        else Position.ABOVE
        if epoch > window.max
        else Position.INSIDE
    )
    assert window.position(epoch) is expected


@given(windows())
def test_both_bounds_are_inside_and_their_neighbours_are_not(window: EpochWindow) -> None:
    assert window.position(window.previous) is Position.INSIDE
    assert window.position(window.max) is Position.INSIDE
    assert window.position(window.previous - 1) is Position.BELOW
    assert window.position(window.max + 1) is Position.ABOVE


@given(windows())
def test_size_counts_the_epochs_inside(window: EpochWindow) -> None:
    around = range(window.previous - 3, window.max + 4)
    inside = [e for e in around if window.position(e) is Position.INSIDE]
    assert window.size == len(inside) >= 1


@given(epochs)
def test_a_single_epoch_window_admits_exactly_that_epoch(epoch: int) -> None:
    window = EpochWindow(epoch, epoch)
    assert window.size == 1
    assert window.position(epoch) is Position.INSIDE


@given(windows(), st.integers(min_value=1, max_value=10**6))
def test_sliding_moves_the_window_to_old_max_and_new_epoch(window: EpochWindow, gap: int) -> None:
    epoch = window.max + gap
    slid = window.slide(epoch)
    assert slid == EpochWindow(window.max, epoch)
    assert slid.size == gap + 1, "epochs need not be contiguous: the gap is admitted"
    assert slid.position(window.max) is Position.INSIDE
    assert slid.position(epoch) is Position.INSIDE
    assert window == EpochWindow(window.previous, window.max), "the old window is unchanged"


@given(windows(), st.integers(min_value=0, max_value=2000))
def test_sliding_to_an_epoch_not_above_the_window_is_refused(
    window: EpochWindow, back: int
) -> None:
    epoch = window.max - back
    with pytest.raises(ValueError, match="slide needs an epoch above the window"):
        window.slide(epoch)


@given(windows(), st.lists(st.integers(min_value=1, max_value=1000), max_size=20))
def test_a_window_only_ever_moves_forward(window: EpochWindow, gaps: list[int]) -> None:
    for gap in gaps:
        slid = window.slide(window.max + gap)
        assert slid.previous >= window.previous and slid.max > window.max
        assert slid.previous <= slid.max
        assert window.position(slid.max) is Position.ABOVE
        window = slid


@given(epochs, st.integers(min_value=1, max_value=1000))
def test_a_window_with_previous_above_max_is_refused(max_epoch: int, excess: int) -> None:
    with pytest.raises(ValueError, match=f"previous={max_epoch + excess} > max={max_epoch}"):
        EpochWindow(max_epoch + excess, max_epoch)


def test_a_window_prints_as_its_inclusive_range() -> None:
    assert str(EpochWindow(6, 10)) == "[6, 10]"
