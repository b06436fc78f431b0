"""Node report codec against the public contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.storage.keys import PartitionId
from epochgc.watermarks.partition.state import PartitionState
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    StuckCause,
    carried_entries,
    decode_report,
    encode_report,
    report_of,
)

CONTRACT_EXAMPLE = b"""{"v": 2, "node": "reconciler-1", "generated_at": "2026-11-22T03:00:05Z",
 "partitions": [
   {"topic": "orders", "revision": 7, "partition": 0, "term": 3, "safe_epoch": 41,
    "lro": 1234, "max_applied_epoch": 45, "previous_applied_epoch": 43}
 ]}"""

V1_EXAMPLE = b"""{"v": 1, "node": "reconciler-1", "generated_at": "2026-11-22T03:00:05Z",
 "partitions": [
   {"topic": "orders", "partition": 0, "term": 3, "safe_epoch": 41,
    "lro": 1234, "max_applied_epoch": 45, "previous_applied_epoch": 43}
 ]}"""

P0 = PartitionId("t", 1, 0)
P1 = PartitionId("t", 1, 1)


def test_the_contract_example_parses_and_round_trips() -> None:
    report = decode_report(CONTRACT_EXAMPLE)
    assert report == NodeReport(
        "reconciler-1",
        datetime(2026, 11, 22, 3, 0, 5, tzinfo=UTC),
        (PartitionReport("orders", 7, 0, 3, 41, 1234, 45, 43),),
    )
    assert json.loads(encode_report(report)) == json.loads(CONTRACT_EXAMPLE)


def test_a_v1_report_is_read_but_its_entries_count_for_nothing() -> None:
    """v1 entries name no revision: they cannot be matched to a topic
    incarnation, so they must not vouch for any."""
    report = decode_report(V1_EXAMPLE)
    assert report.node == "reconciler-1"
    assert report.partitions == () and report.ignored_entries == 1


def test_report_of_publishes_m_of_p() -> None:
    state = PartitionState.new(7)
    pid = PartitionId("orders", 7, 2)
    report = report_of("node-1", datetime(2026, 1, 1, tzinfo=UTC), [(pid, state)])
    assert report.partitions[0].safe_epoch == 6 == state.safe_epoch
    assert report.partitions[0].pid == pid


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda d: d.update(v=3), UnsupportedVersionError),
        (lambda d: d["partitions"][0].pop("revision"), MalformedRecordError),
        (lambda d: d["partitions"][0].update(revision=0), MalformedRecordError),
        (lambda d: d.update(node="a/b"), MalformedRecordError),
        (lambda d: d.update(generated_at="soon"), MalformedRecordError),
        (lambda d: d.update(partitions={}), MalformedRecordError),
        (lambda d: d["partitions"][0].update(safe_epoch="41"), MalformedRecordError),
        (lambda d: d["partitions"][0].update(topic="bad topic"), MalformedRecordError),
        (lambda d: d["partitions"][0].pop("lro"), MalformedRecordError),
    ],
)
def test_bad_reports_are_refused_whole(mutate, error) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(CONTRACT_EXAMPLE)
    mutate(doc)
    with pytest.raises(error):
        decode_report(json.dumps(doc).encode())


def test_unknown_fields_are_ignored() -> None:
    doc = json.loads(CONTRACT_EXAMPLE)
    doc["zone"] = "eu-west-1a"
    doc["partitions"][0]["leader_epoch"] = 9
    assert decode_report(json.dumps(doc).encode()).partitions[0].safe_epoch == 41


def _entry(topic: str, partition: int, safe_epoch: int, term: int = 1) -> PartitionReport:
    return PartitionReport(topic, 1, partition, term, safe_epoch, 0, safe_epoch + 1, safe_epoch)


def test_a_lost_partition_is_carried_until_another_node_covers_it() -> None:
    previous = {P0: _entry("t", 0, 7), P1: _entry("t", 1, 5)}
    live = [P0, P1]
    now = datetime(2026, 11, 22, tzinfo=UTC)
    # Nobody else reports t/0 yet: keep it (dropping it would lower M).
    nobody = carried_entries("a", previous, [P1], live, [])
    assert set(nobody) == {P0}
    # Another node reports it lower: still keep ours.
    lower = NodeReport("b", now, (_entry("t", 0, 6),))
    assert set(carried_entries("a", previous, [P1], live, [lower])) == {P0}
    # Covered at least as high, but by an entry of the same (or an older)
    # term: another carrier, which may be dropping it right now: keep it.
    carrier = NodeReport("b", now, (_entry("t", 0, 7),))
    assert set(carried_entries("a", previous, [P1], live, [carrier])) == {P0}
    # Covered at least as high by a newer leadership: drop it.
    covered = NodeReport("b", now, (_entry("t", 0, 7, term=2),))
    assert carried_entries("a", previous, [P1], live, [covered]) == {}
    # Our own report never covers us; a partition no longer live is dropped.
    own = NodeReport("a", now, (_entry("t", 0, 9),))
    assert set(carried_entries("a", previous, [], live, [own])) == {P0, P1}
    assert carried_entries("a", previous, [], [P1], []) == {P1: previous[P1]}


@given(
    terms=st.lists(st.integers(1, 5), min_size=2, max_size=4, unique=True),
    values=st.lists(st.integers(0, 3), min_size=4, max_size=4),
    stale_reads=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_carriers_never_all_drop_a_partition_at_once(
    terms: list[int], values: list[int], stale_reads: list[bool]
) -> None:
    """Nodes carrying the same partition (none leads it) publish at once,
    each from the others' reports as they were before this round, or as
    after (stale or fresh reads): at least one of them keeps it."""
    now = datetime(2026, 11, 22, tzinfo=UTC)
    nodes = [f"n{i}" for i in range(len(terms))]
    # M(p) only grows with the term: a newer leadership never reports less.
    by_term = sorted(terms)
    entries = {
        node: _entry("t", 0, sum(values[: by_term.index(term) + 1]), term=term)
        for node, term in zip(nodes, terms, strict=True)
    }
    before = [NodeReport(n, now, (entries[n],)) for n in nodes]
    kept = {}
    for i, node in enumerate(nodes):
        seen = before if stale_reads[i] else [r for r in before if r.node < node]
        kept[node] = carried_entries(node, {P0: entries[node]}, [], [P0], seen)
    assert any(kept.values())
    # The newest leadership's entry is always among the kept.
    newest = max(nodes, key=lambda n: entries[n].term)
    assert kept[newest]


def test_a_stuck_cause_is_an_optional_field_and_a_bad_one_is_dropped() -> None:
    """``stuck`` rides along in version 2 (additive, optional); a value that
    does not parse is dropped without spoiling the report: it is never an
    input to M."""
    since = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
    cause = StuckCause("missing", "epochgc/l0/001/000000000000000003/x", 2, 4, since, "404")
    state = PartitionState.new(1)
    report = report_of("n1", since, [(P0, state), (P1, state)], stuck={P1: cause})
    doc = json.loads(encode_report(report))
    assert doc["v"] == 2
    assert "stuck" not in doc["partitions"][0]
    assert doc["partitions"][1]["stuck"]["first_offset"] == 2
    decoded = decode_report(encode_report(report))
    assert decoded == report and decoded.partitions[1].stuck == cause
    doc["partitions"][1]["stuck"] = {"cause": "missing", "key": 7}
    decoded = decode_report(json.dumps(doc).encode())
    assert decoded.partitions[1].stuck is None
    assert decoded.partitions[1].safe_epoch == state.safe_epoch
