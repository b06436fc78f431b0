"""The leader's seen epoch window: pure arithmetic (docs/architecture.md,
"Life of an L0 object", step 2).

The window ``[previous, max]`` is the range of epochs a partition leader
admits. It only moves forward: an epoch above it slides it to
``[max, epoch]``; an epoch below it is stale. Epochs need not be contiguous:
``[5, 6]`` then 10 gives ``[6, 10]``, which admits 6..10.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Position(Enum):
    """Where an epoch falls relative to a window."""

    BELOW = "below"
    INSIDE = "inside"
    ABOVE = "above"


@dataclass(frozen=True)
class EpochWindow:
    """An inclusive epoch range ``[previous, max]``."""

    previous: int
    max: int

    def __post_init__(self) -> None:
        if self.previous > self.max:
            raise ValueError(f"window previous={self.previous} > max={self.max}")

    def position(self, epoch: int) -> Position:
        """Classify ``epoch``."""
        if epoch < self.previous:
            return Position.BELOW
        if epoch <= self.max:
            return Position.INSIDE
        return Position.ABOVE

    def slide(self, epoch: int) -> EpochWindow:
        """The window after admitting an epoch above it.

        Raises:
            ValueError: ``epoch`` is not above the window.
        """
        if epoch <= self.max:
            raise ValueError(f"slide needs an epoch above the window, got {epoch} for {self}")
        return EpochWindow(self.max, epoch)

    @property
    def size(self) -> int:
        """Epochs admitted by the window."""
        return self.max - self.previous + 1

    def __str__(self) -> str:
        return f"[{self.previous}, {self.max}]"
