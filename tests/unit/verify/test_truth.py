"""The logs' ``M`` that verify holds the published one against: the same
floor and ceiling rules as the collectors' join, so that in a correct build
the two agree whenever the reports carry what the logs hold."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from epochgc.storage.keys import PartitionId
from epochgc.verify.truth import logged_safe_epoch
from epochgc.watermarks.controller import ControllerView, TopicInfo
from epochgc.watermarks.safe_epoch.aggregate import join_safe_epoch
from epochgc.watermarks.safe_epoch.reports import NodeReport, PartitionReport

T0 = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)

topics = st.dictionaries(
    st.sampled_from(["orders", "clicks", "churn"]),
    st.tuples(st.integers(1, 4), st.integers(1, 60)),
    max_size=3,
)


@given(topics, st.integers(0, 80), st.data())
def test_the_logs_m_is_the_join_of_reports_that_carry_the_logs(
    spec: dict[str, tuple[int, int]], offset: int, data: st.DataObject
) -> None:
    view = ControllerView(
        offset, {name: TopicInfo(name, n, revision) for name, (n, revision) in spec.items()}
    )
    logged = {
        pid: data.draw(st.integers(-1, 90), label=str(pid))
        for pid in sorted(view.live_partitions())
    }
    report = NodeReport(
        "node-a",
        T0,
        tuple(
            PartitionReport(pid.topic, pid.revision, pid.partition, 1, m, 0, m + 1, m + 1)
            for pid, m in logged.items()
        ),
    )
    assert logged_safe_epoch(view, logged).safe_epoch == join_safe_epoch(view, [report]).safe_epoch


def test_the_floor_and_the_ceiling_bound_the_logs_m() -> None:
    view = ControllerView(40, {"orders": TopicInfo("orders", 2, 10)})
    orders0, orders1 = PartitionId("orders", 10, 0), PartitionId("orders", 10, 1)
    # A log that has not moved yet sits at the floor (revision - 1).
    assert logged_safe_epoch(view, {orders0: 3, orders1: 30}).safe_epoch == 9
    assert logged_safe_epoch(view, {orders0: 3, orders1: 30}).pinning == (orders0,)
    assert logged_safe_epoch(view, {orders0: 55, orders1: 60}).safe_epoch == 40
    assert logged_safe_epoch(ControllerView(7, {}), {}).safe_epoch == 7
