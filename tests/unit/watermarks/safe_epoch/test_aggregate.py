"""The global safe epoch join and its monotone tracker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from epochgc.watermarks.controller import ControllerView, TopicInfo
from epochgc.watermarks.safe_epoch.aggregate import SafeEpochTracker, join_safe_epoch
from epochgc.watermarks.safe_epoch.reports import NodeReport, PartitionReport

T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def view(offset: int, *topics: tuple[str, int, int]) -> ControllerView:
    return ControllerView(offset, {n: TopicInfo(n, p, r) for n, p, r in topics})


def report(
    node: str, *entries: tuple[str, int, int], age: int = 0, revision: int = 10
) -> NodeReport:
    """A report whose entries all name ``revision`` (the views below create
    their topics at revision 10 unless they say otherwise)."""
    return NodeReport(
        node,
        T0 - timedelta(seconds=age),
        tuple(PartitionReport(t, revision, p, 1, m, 0, m + 1, m + 1) for t, p, m in entries),
    )


def test_min_over_partitions_and_snapshot() -> None:
    v = view(50, ("orders", 2, 10))
    result = join_safe_epoch(v, [report("a", ("orders", 0, 30), ("orders", 1, 20))])
    assert result.safe_epoch == 20
    assert [(w.partition, w.safe_epoch, w.node) for w in result.pinning] == [
        (1, 20, "a"),
        (0, 30, "a"),
    ]
    assert (
        join_safe_epoch(view(15, ("orders", 1, 10)), [report("a", ("orders", 0, 30))]).safe_epoch
        == 15
    )


def test_no_live_topics_gives_the_snapshot() -> None:
    assert join_safe_epoch(view(42), []).safe_epoch == 42


def test_an_unreported_partition_counts_as_revision_minus_one() -> None:
    result = join_safe_epoch(view(50, ("orders", 2, 10)), [report("a", ("orders", 0, 30))])
    assert result.safe_epoch == 9
    assert result.unreported == 1
    assert result.pinning[0].node is None


def test_the_highest_report_wins_and_stale_reports_never_lower_m() -> None:
    v = view(50, ("orders", 1, 10))
    fresh = report("a", ("orders", 0, 30))
    stale = report("b", ("orders", 0, 12), age=600)
    assert join_safe_epoch(v, [stale, fresh]).safe_epoch == 30
    assert join_safe_epoch(v, [stale, fresh]).oldest_report_at == T0 - timedelta(seconds=600)


def test_deleted_topics_no_longer_pin_and_new_topics_are_protected() -> None:
    reports = [report("a", ("old", 0, 5), ("orders", 0, 30))]
    assert join_safe_epoch(view(50, ("orders", 1, 10)), reports).safe_epoch == 30
    # A topic created after the snapshot is not in it: M <= snap < its revision.
    result = join_safe_epoch(view(50, ("orders", 1, 10)), [*reports, report("b", ("new", 0, 70))])
    assert result.safe_epoch == 30 < 51


def test_entries_of_another_incarnation_of_a_live_name_are_ignored() -> None:
    """``orders`` was deleted and created again at revision 40: the old
    incarnation's high M(p) says nothing about the new one, whose
    unreported partition counts as 39."""
    v = view(50, ("orders", 1, 40))
    old = report("a", ("orders", 0, 45), revision=10)
    result = join_safe_epoch(v, [old])
    assert result.safe_epoch == 39 and result.unreported == 1
    assert join_safe_epoch(v, [old, report("b", ("orders", 0, 44), revision=40)]).safe_epoch == 44


def test_reports_for_partitions_beyond_the_count_are_ignored() -> None:
    result = join_safe_epoch(
        view(50, ("orders", 1, 10)), [report("a", ("orders", 5, 1), ("orders", 0, 40))]
    )
    assert result.safe_epoch == 40


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 100)), max_size=12),
    st.integers(0, 120),
)
def test_m_is_at_most_every_partitions_floor_and_the_snapshot(
    entries: list[tuple[int, int]], snap: int
) -> None:
    v = view(snap, ("orders", 4, 5))
    result = join_safe_epoch(v, [report("a", *[("orders", p, m) for p, m in entries], revision=5)])
    assert result.safe_epoch <= snap
    for partition in range(4):
        reported = [m for p, m in entries if p == partition]
        floor = max([*reported, 4]) if reported else 4
        assert result.safe_epoch <= floor


def test_tracker_never_goes_backwards_and_blocks_after_failures() -> None:
    tracker = SafeEpochTracker(blocked_after=2)
    high = join_safe_epoch(view(50), [])
    low = join_safe_epoch(view(40), [])
    assert tracker.observe(high).safe_epoch == 50
    assert tracker.observe(low).safe_epoch == 50
    assert tracker.regressions_ignored == 1
    tracker.failed(RuntimeError("unreadable controller entry"))
    assert not tracker.is_blocked
    tracker.failed(RuntimeError("again"))
    assert tracker.is_blocked
    tracker.observe(high)
    assert not tracker.is_blocked
