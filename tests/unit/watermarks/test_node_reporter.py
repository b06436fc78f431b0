"""A node's successive reports (``NodeReporter``): the entries of partitions
it led before are carried; with two processes of one node id, the one
without a valid node lease publishes nothing, and one that takes the lease
again starts from what the other published, so no entry moves back."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import PartitionId, report_key
from epochgc.storage.object_store import get_or_none
from epochgc.watermarks.partition.state import PartitionState
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    NodeReporter,
    PartitionReport,
    publish_report,
)

ROOT = "r"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
P = PartitionId("orders", 1, 0)


def state(safe_epoch: int, term: int) -> PartitionState:
    return dataclasses.replace(
        PartitionState.new(1), min_epoch_lower_bound=safe_epoch + 1, term=term
    )


def entry_of(report: NodeReport | None) -> tuple[int, int] | None:
    """(term, ``M(p)``) of ``P`` in ``report``."""
    assert report is not None
    found = [e for e in report.partitions if e.pid == P]
    return (found[0].term, found[0].safe_epoch) if found else None


def test_a_node_without_a_valid_lease_publishes_nothing() -> None:
    store = MemoryStore()
    reporter = NodeReporter(store, ROOT, "node-2")
    assert reporter.next_report(NOW, [(P, state(5, 1))], [P], incarnation=None) is None
    assert store.count() == 0, "not even a read"


def test_a_partition_no_longer_led_is_carried_until_covered() -> None:
    store = MemoryStore()
    reporter = NodeReporter(store, ROOT, "node-2")
    publish_report(store, ROOT, reporter.next_report(NOW, [(P, state(5, 1))], [P], incarnation="a"))  # type: ignore[arg-type]
    assert entry_of(reporter.next_report(NOW, [], [P], incarnation="a")) == (1, 5)
    newer = PartitionReport.of(P, state(6, 2))
    publish_report(store, ROOT, NodeReport("node-1", NOW, (newer,)))
    assert entry_of(reporter.next_report(NOW, [], [P], incarnation="a")) is None


def test_a_new_incarnation_starts_from_the_report_another_process_published() -> None:
    """Process A of node-2 led P to ``M(p)`` 5 and stopped; process B of
    the same node id led it on to 9 under a newer term and published;
    when A holds the node lease again (a new incarnation) it must carry
    B's entry, not its own older one."""
    store = MemoryStore()
    first = NodeReporter(store, ROOT, "node-2")
    second = NodeReporter(store, ROOT, "node-2")
    publish_report(store, ROOT, first.next_report(NOW, [(P, state(5, 1))], [P], incarnation="a"))  # type: ignore[arg-type]
    publish_report(store, ROOT, second.next_report(NOW, [(P, state(9, 2))], [P], incarnation="b"))  # type: ignore[arg-type]
    assert entry_of(first.next_report(NOW, [], [P], incarnation="c")) == (2, 9)


def test_the_same_incarnation_keeps_what_it_remembers() -> None:
    """Within one incarnation the node's own report is read once: its
    memory, set before each PUT, is as new as anything it published."""
    store = MemoryStore()
    reporter = NodeReporter(store, ROOT, "node-2")
    reporter.next_report(NOW, [(P, state(5, 1))], [P], incarnation="a")  # its PUT never landed
    assert entry_of(reporter.next_report(NOW, [], [P], incarnation="a")) == (1, 5)
    assert get_or_none(store, report_key(ROOT, "node-2")) is None
