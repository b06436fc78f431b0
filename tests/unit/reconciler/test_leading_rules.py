"""The rules a node's rounds apply to what it leads (``reconciler/leading_rules.py``),
over every combination of their inputs: the node and the simulation decide
by these, so they must say exactly what the docstrings promise."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from epochgc.reconciler.leading_rules import (
    LEADER_FAILED,
    NOT_OWNED,
    TOPIC_GONE,
    idle_advance_due,
    step_down_reason,
    to_lead,
)
from epochgc.storage.keys import PartitionId
from epochgc.watermarks.partition.state import PartitionState

PIDS = [
    PartitionId(topic, revision, p) for topic in ("a", "b") for revision in (1, 7) for p in (0, 1)
]
pid_sets = st.frozensets(st.sampled_from(PIDS))


@given(
    st.sampled_from(PIDS),
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(0, 3)),
    st.booleans(),
    pid_sets,
)
def test_a_partition_is_kept_only_while_live_owned_at_its_term_and_its_writer_open(
    pid: PartitionId,
    led_term: int,
    owned_term: int | None,
    writer_open: bool,
    live: frozenset[PartitionId],
) -> None:
    reason = step_down_reason(
        pid, led_term=led_term, owned_term=owned_term, writer_open=writer_open, live=live
    )
    keep = pid in live and owned_term == led_term and writer_open
    assert (reason is None) == keep
    # The first reason that holds is the one given (and counted).
    if pid not in live:
        assert reason == TOPIC_GONE
    elif owned_term != led_term:
        assert reason == NOT_OWNED
    elif not writer_open:
        assert reason == LEADER_FAILED


@given(pid_sets, pid_sets, pid_sets)
def test_what_to_lead_is_what_is_owned_live_and_not_led(
    owned: frozenset[PartitionId], led: frozenset[PartitionId], live: frozenset[PartitionId]
) -> None:
    assert to_lead(owned, led, live) == (owned & live) - led


@given(
    st.integers(0, 20),
    st.integers(-1, 5),
    st.integers(0, 6),
    st.floats(0.0, 100.0),
    st.integers(0, 25),
)
def test_an_idle_partition_is_advanced_only_when_reconciled_idle_and_behind(
    max_applied: int, lro: int, next_offset: int, idle_for: float, cluster_epoch: int
) -> None:
    state = dataclasses.replace(
        PartitionState.new(1), max_applied_epoch=max_applied, lro=lro, next_offset=next_offset
    )
    due = idle_advance_due(state, idle_for=idle_for, idle_seconds=30.0, cluster_epoch=cluster_epoch)
    reconciled = lro == next_offset - 1
    assert due == (reconciled and idle_for >= 30.0 and cluster_epoch > max_applied)
