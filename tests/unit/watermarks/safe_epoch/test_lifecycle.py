"""Which reports the GC leader may delete: never one whose absence lowers M."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from epochgc.storage.keys import PartitionId
from epochgc.watermarks.controller import ControllerView, TopicInfo
from epochgc.watermarks.safe_epoch.aggregate import join_safe_epoch
from epochgc.watermarks.safe_epoch.lifecycle import forget_impact, removable_reports
from epochgc.watermarks.safe_epoch.reports import NodeReport, PartitionReport

NOW = datetime(2026, 11, 23, tzinfo=UTC)
VIEW = ControllerView(100, {"t": TopicInfo("t", 3, 5)})
LIVE = VIEW.live_partitions()
DEAD = 600.0


def entry(partition: int, safe: int, term: int = 1, revision: int = 5) -> PartitionReport:
    return PartitionReport("t", revision, partition, term, safe, 0, safe + 1, safe)


def report(node: str, *entries: PartitionReport, ignored: int = 0) -> NodeReport:
    return NodeReport(node, NOW, entries, ignored)


def test_a_gone_node_covered_by_a_live_one_goes() -> None:
    gone = report("old", entry(0, 10, term=2))
    live = report("new", entry(0, 12, term=3))
    assert removable_reports([gone, live], {"old": DEAD}, LIVE, dead_after_seconds=DEAD) == ["old"]


def test_what_keeps_a_report() -> None:
    gone = report("old", entry(0, 10, term=2), entry(1, 10, term=2))
    silent = {"old": DEAD}
    # Not covered for partition 1.
    partial = report("new", entry(0, 12, term=3))
    assert removable_reports([gone, partial], silent, LIVE, dead_after_seconds=DEAD) == []
    # Covered, but lower: M(p) would fall.
    lower = report("new", entry(0, 9, term=3), entry(1, 12, term=3))
    assert removable_reports([gone, lower], silent, LIVE, dead_after_seconds=DEAD) == []
    # Covered by an older term: that carrier may drop its entry for ours.
    older = report("new", entry(0, 12, term=1), entry(1, 12, term=1))
    assert removable_reports([gone, older], silent, LIVE, dead_after_seconds=DEAD) == []
    # Covered only by another silent report.
    both = {"old": DEAD, "new": DEAD}
    cover = report("new", entry(0, 12, term=3), entry(1, 12, term=3))
    assert removable_reports([gone, cover], both, LIVE, dead_after_seconds=DEAD) == []
    # Not silent long enough.
    assert removable_reports([gone, cover], {"old": DEAD - 1}, LIVE, dead_after_seconds=DEAD) == []


def test_reports_that_count_for_nothing_go_once_silent() -> None:
    legacy = report("v1-node", ignored=4)
    other_incarnation = report("old", entry(0, 50, revision=2))
    silent = {"v1-node": DEAD, "old": DEAD}
    nodes = removable_reports([legacy, other_incarnation], silent, LIVE, dead_after_seconds=DEAD)
    assert nodes == ["old", "v1-node"]


reports_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d"]),
        st.lists(st.tuples(st.integers(0, 3), st.integers(3, 40), st.integers(1, 4)), max_size=4),
        st.booleans(),
    ),
    max_size=4,
    unique_by=lambda r: r[0],
)


@given(reports_strategy)
def test_deleting_what_is_removable_never_changes_m(
    drawn: list[tuple[str, list[tuple[int, int, int]], bool]],
) -> None:
    reports = [report(n, *(entry(p, s, t) for p, s, t in es)) for n, es, _ in drawn]
    silent = {n: (DEAD if gone else 0.0) for n, _, gone in drawn}
    victims = removable_reports(reports, silent, LIVE, dead_after_seconds=DEAD)
    kept = [r for r in reports if r.node not in victims]
    assert join_safe_epoch(VIEW, kept).safe_epoch == join_safe_epoch(VIEW, reports).safe_epoch
    assert all(silent[v] >= DEAD for v in victims)


def test_forget_impact_names_the_partitions_it_lowers() -> None:
    alone = report("old", entry(0, 30), entry(1, 30))
    other = report("new", entry(1, 40), entry(2, 40))
    impact = forget_impact(VIEW, [alone, other], "old")
    assert impact.lowers_m and impact.safe_epoch_without == 4
    assert impact.partitions_lowered == (PartitionId("t", 5, 0),)
    assert not forget_impact(VIEW, [alone, other, report("x", entry(0, 31))], "old").lowers_m
