"""The deliberately unsafe ``M(p)`` rule of the test builds that must be
caught: ``epochgc verify --unsafe-test-build`` composes its worker nodes
with it, ``epochgc simulate --unsafe-test-build`` its simulated nodes. No
shipped command can reach it."""

from __future__ import annotations

from epochgc.watermarks.partition.state import PartitionState


def unsafe_max_applied_rule(state: PartitionState) -> int:
    """``M(p) = max_applied_epoch - 1`` instead of ``min_epoch_lower_bound -
    1``, so placeholders written at ``previous_applied_epoch`` and not
    reconciled yet fall at or below it."""
    return max(state.safe_epoch, state.max_applied_epoch - 1)
