"""Every incarnation guard that is pure logic, each held by a named scenario
and a property (issue 26, item 6).

A topic deleted and created again under the same name is a new incarnation
(``PartitionId.revision``). Anything of the old one that counted for the
new one could raise ``M`` above what the new one allows, or hand its state
to the new one: the collector would then delete live data. Each test below
was run with its guard removed and failed (the table is in the issue's
closing note; docs/development.md says how to repeat it). Store-backed
guards are in tests/integration/test_incarnation_guards.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.gc.janitor import dead_incarnations
from epochgc.ingest.producer import LeaderFit, leader_fit
from epochgc.storage.keys import (
    PartitionId,
    legacy_partition_lease_key,
    owner_key,
    parse_owner_key,
    partition_l1_prefix,
    partition_log_prefix,
    partition_snapshot_key,
)
from epochgc.watermarks.controller import ControllerView, TopicInfo
from epochgc.watermarks.safe_epoch.aggregate import join_safe_epoch
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    carried_entries,
)

ROOT = "epochgc"
T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def entry(pid: PartitionId, safe_epoch: int, term: int = 1) -> PartitionReport:
    return PartitionReport(
        pid.topic, pid.revision, pid.partition, term, safe_epoch, 0, safe_epoch + 2, safe_epoch + 1
    )


def node_report(node: str, *entries: PartitionReport) -> NodeReport:
    return NodeReport(node, T0, tuple(entries))


def live_view(offset: int, *topics: tuple[str, int, int]) -> ControllerView:
    """``(name, partitions, revision)`` per live topic."""
    return ControllerView(offset, {n: TopicInfo(n, p, r) for n, p, r in topics})


# --- the report join (watermarks/safe_epoch/aggregate.py, join_safe_epoch) ---------------------


def test_a_report_entry_for_orders_at_1_does_not_raise_m_while_orders_at_3_is_live() -> None:
    """A node that has not seen the delete yet still moves orders@1's M(p);
    orders@3, created at offset 3 and not reported by anyone, stays at its
    floor 2."""
    view = live_view(100, ("orders", 1, 3))
    stale = node_report("slow-node", entry(PartitionId("orders", 1, 0), 90))
    result = join_safe_epoch(view, [stale])
    assert result.safe_epoch == 2
    assert result.unreported == 1
    assert result.pinning[0].node is None


revisions = st.integers(1, 6)
entries_of_one_name = st.lists(
    st.tuples(revisions, st.integers(0, 1), st.integers(0, 200)), max_size=10
)


@given(entries_of_one_name, revisions, st.integers(0, 250))
def test_m_counts_only_entries_of_the_live_incarnation(
    entries: list[tuple[int, int, int]], live: int, offset: int
) -> None:
    """Random entries for random incarnations of one name: M is at most,
    for each partition of the live incarnation, the highest entry that
    names that incarnation (or its floor ``revision - 1`` when none does),
    whatever the other incarnations' entries say."""
    view = live_view(max(offset, live), ("orders", 2, live))
    reports = [
        node_report(f"n{i}", entry(PartitionId("orders", rev, p), m))
        for i, (rev, p, m) in enumerate(entries)
    ]
    result = join_safe_epoch(view, reports)
    for partition in range(2):
        own = [m for rev, p, m in entries if rev == live and p == partition]
        assert result.safe_epoch <= max([*own, live - 1])


# --- the producer's binding of a chunk to its revision (ingest/producer.py) ---------


def test_a_chunk_bound_to_orders_at_1_is_never_submitted_to_a_leader_of_orders_at_3() -> None:
    assert leader_fit(serving=3, bound=1) is LeaderFit.REFUSE
    assert leader_fit(serving=1, bound=3) is LeaderFit.WAIT
    assert leader_fit(serving=3, bound=3) is LeaderFit.SUBMIT


@given(st.integers(1, 10**6), st.integers(1, 10**6))
def test_a_chunk_is_submitted_exactly_to_its_own_incarnation(serving: int, bound: int) -> None:
    fit = leader_fit(serving, bound)
    assert (fit is LeaderFit.SUBMIT) == (serving == bound)
    assert (fit is LeaderFit.REFUSE) == (serving > bound)


# --- keys: logs, snapshots, L1, ownership records, old partition leases -------------


def _keys_of(pid: PartitionId) -> dict[str, str]:
    return {
        "log": partition_log_prefix(ROOT, pid),
        "snapshot": partition_snapshot_key(ROOT, pid),
        "l1": partition_l1_prefix(ROOT, pid),
        "owner": owner_key(ROOT, pid),
        "lease": legacy_partition_lease_key(ROOT, pid),
    }


def test_orders_at_1_and_orders_at_3_share_no_log_snapshot_l1_owner_or_lease_key() -> None:
    old, new = _keys_of(PartitionId("orders", 1, 0)), _keys_of(PartitionId("orders", 3, 0))
    for kind in old:
        assert old[kind] != new[kind], kind
        assert not new[kind].startswith(old[kind]) and not old[kind].startswith(new[kind]), kind
    assert parse_owner_key(new["owner"], ROOT) == PartitionId("orders", 3, 0)


topics = st.sampled_from(["orders", "a", "a.1", "a.1.5"])
pids = st.builds(PartitionId, topics, st.integers(1, 30), st.integers(0, 12))


@given(pids, pids)
def test_two_incarnations_never_share_a_key_or_a_prefix(a: PartitionId, b: PartitionId) -> None:
    """Keys equal, or one under the other's prefix, only for the same
    partition incarnation; an ownership record parses back to its own."""
    keys_a, keys_b = _keys_of(a), _keys_of(b)
    for kind in keys_a:
        same = keys_a[kind] == keys_b[kind]
        assert same == (a == b), kind
        if kind in ("log", "l1") and a != b:
            assert not keys_b[kind].startswith(keys_a[kind]), kind
    assert parse_owner_key(keys_a["owner"], ROOT) == a


# --- carried report entries (watermarks/safe_epoch/reports.py, carried_entries) ---------------


def test_a_carried_entry_for_orders_at_1_is_dropped_once_orders_at_3_is_live() -> None:
    old = PartitionId("orders", 1, 0)
    carried = carried_entries(
        "n1", {old: entry(old, 50)}, led=[], live=[PartitionId("orders", 3, 0)], reports=[]
    )
    assert carried == {}


@given(st.lists(st.tuples(revisions, st.integers(0, 2)), max_size=8, unique=True), revisions)
def test_carried_entries_are_only_of_live_incarnations(
    previous: list[tuple[int, int]], live_revision: int
) -> None:
    reported = {
        (pid := PartitionId("orders", rev, p)): entry(pid, 10 * rev + p) for rev, p in previous
    }
    live = [PartitionId("orders", live_revision, p) for p in range(3)]
    carried = carried_entries("n1", reported, led=[], live=live, reports=[])
    assert all(pid.revision == live_revision for pid in carried)
    assert set(carried) == {pid for pid in reported if pid.revision == live_revision}


# --- the janitor's liveness check (gc/janitor.py, dead_incarnations) ---------------


def test_the_janitor_finds_orders_at_1_dead_and_never_orders_at_3() -> None:
    view = live_view(5, ("orders", 2, 3))
    assert dead_incarnations({("orders", 1), ("orders", 3)}, view) == [("orders", 1)]


@settings(max_examples=200)
@given(
    st.sets(st.tuples(st.sampled_from(["orders", "a", "a.1"]), revisions), max_size=8),
    st.dictionaries(st.sampled_from(["orders", "a", "a.1"]), revisions, max_size=3),
    st.integers(0, 8),
)
def test_the_janitor_never_picks_a_live_incarnation(
    present: set[tuple[str, int]], live: dict[str, int], offset: int
) -> None:
    view = live_view(max([offset, *live.values()]), *[(n, 1, r) for n, r in live.items()])
    dead = set(dead_incarnations(present, view))
    assert not dead & set(live.items())
    assert dead == {(n, r) for n, r in present if live.get(n) != r and r <= view.offset}
