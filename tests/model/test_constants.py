"""The constants the models hard-code are the code's: a change to the code
that the model does not follow fails here, not silently in the model."""

from __future__ import annotations

import re
from pathlib import Path

import check

from epochgc.config import LeaseConfig
from epochgc.leases import timing
from epochgc.watermarks.controller import CONTROLLER_FIRST_OFFSET, ControllerView, TopicInfo
from epochgc.watermarks.partition.commands import AdvanceEpoch, TermStart
from epochgc.watermarks.partition.state import PartitionState, apply
from epochgc.watermarks.safe_epoch.aggregate import join_safe_epoch

_DEFINE = re.compile(r"^#define\s+([A-Z_][A-Z0-9_]*)\s+(-?\d+)\b", re.MULTILINE)


def defines(model: Path) -> dict[str, int]:
    """The numeric ``#define``s of a model (the first of each name)."""
    found: dict[str, int] = {}
    for name, value in _DEFINE.findall(model.read_text()):
        found.setdefault(name, int(value))
    return found


LOG = defines(check.LOG_MODEL)
LEASE = defines(check.LEASE_MODEL)


def test_controller_offsets_start_where_the_code_starts_them() -> None:
    assert LOG["FIRST_CONTROLLER_OFFSET"] == CONTROLLER_FIRST_OFFSET


def test_a_new_partition_is_what_the_model_creates() -> None:
    """create_partitions sets the window and the lower bound to the
    revision and numbers log slots from 1 (the code's from 0)."""
    revision = 3
    state = PartitionState.new(revision)
    assert state.max_applied_epoch == state.previous_applied_epoch == revision
    assert state.min_epoch_lower_bound == revision
    assert state.window_offset + 1 == LOG["NO_WINDOW_OFFSET"]
    assert state.reconciled_log_offset + 1 == 0  # the model's rlo starts at 0
    assert state.safe_epoch == revision - LOG["SAFE_EPOCH_BELOW_BOUND"]


def test_the_window_is_two_epochs_and_slides_as_the_model_slides_it() -> None:
    """advance_epoch in the model: previous = max; max = e; window_offset = slot."""
    state = PartitionState.new(1)
    state = apply(state, TermStart(1), 0).state
    state = apply(state, AdvanceEpoch(1, 1, 4), 1).state
    assert (state.previous_applied_epoch, state.max_applied_epoch, state.window_offset) == (1, 4, 1)
    state = apply(state, AdvanceEpoch(1, 2, 6), 2).state
    assert (state.previous_applied_epoch, state.max_applied_epoch) == (4, 6)
    state = apply(state, AdvanceEpoch(1, 3, 5), 3).state  # an older epoch: no slide
    assert (state.previous_applied_epoch, state.max_applied_epoch) == (4, 6)


def test_an_unreported_partition_counts_as_revision_minus_the_floor() -> None:
    revision = 4
    view = ControllerView(9, {"t": TopicInfo("t", 2, revision)})
    assert join_safe_epoch(view, []).safe_epoch == revision - LOG["UNREPORTED_FLOOR"]


def test_lease_timing_is_the_codes() -> None:
    """One tick is one second: the stamps' resolution is the code's, the
    margin covers it as the default does, and the model's TTL, renew
    interval and margin pass the code's own check on them."""
    assert LEASE["STAMP_RESOLUTION"] == timing.STAMP_RESOLUTION_SECONDS
    assert LEASE["MARGIN"] == LeaseConfig().skew_margin_seconds
    assert LEASE["MARGIN"] >= LEASE["STAMP_RESOLUTION"]
    LeaseConfig(
        ttl_seconds=LEASE["TTL"],
        renew_interval_seconds=LEASE["RENEW"],
        skew_margin_seconds=LEASE["MARGIN"],
    )._check_together()


def test_the_scope_is_the_one_documented() -> None:
    """By default one topic (and its recreate) of two partitions, two
    nodes; make model's larger scopes pass -DNTOPIC, -DNNODE and -DEMAX."""
    assert (LOG["NTOPIC"], LOG["NPART"], LOG["NNODE"]) == (1, 2, 2)
    assert LOG["EMAX"] >= 4
    large = {d for run in check.SCOPES["large"] for d in run.defines}
    assert {"NTOPIC=2", "NNODE=3", "EMAX=6"} <= large
