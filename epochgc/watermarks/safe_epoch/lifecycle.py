"""Which node reports may be deleted, and what forgetting one would cost.
Pure: no I/O, the clock comes in as numbers.

A report is the only thing that keeps a partition's ``M(p)`` above
``revision - 1`` while nobody else reports it, so deleting one can lower
``M``. The GC leader deletes a report only when both hold:

* its node is **silent**: the report object (its ETag) has not changed for
  ``dead_after_seconds`` on the leader's own monotonic clock (a live node
  rewrites its report every ``reports.interval``; no wall clocks compared);
* every entry of a live incarnation is **covered** by a report of a node
  that is not silent, for the same partition and revision, with
  ``safe_epoch`` at least as high and a term at least as high.

Then ``M`` is the same with or without it. The term condition keeps the
cover from vanishing: a carrier drops its entry only for a cover under a
newer term (``reports.carried_entries``), and the deleted report's term is
at most the cover's. Entries of incarnations that are not live count for
nothing already, and a version 1 report has none that count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from epochgc.storage.keys import PartitionId
from epochgc.watermarks.controller import ControllerView
from epochgc.watermarks.safe_epoch.aggregate import join_safe_epoch
from epochgc.watermarks.safe_epoch.reports import NodeReport


def is_silent(silent_seconds: float, dead_after_seconds: float) -> bool:
    """A node whose report has not changed this long is taken for gone."""
    return silent_seconds >= dead_after_seconds


def removable_reports(
    reports: Iterable[NodeReport],
    silent_seconds: Mapping[str, float],
    live: set[PartitionId],
    *,
    dead_after_seconds: float,
) -> list[str]:
    """The nodes whose reports the GC leader may delete (see the module
    docstring). A node missing from ``silent_seconds`` counts as live."""
    all_reports = list(reports)
    speaking = [
        r for r in all_reports if not is_silent(silent_seconds.get(r.node, 0.0), dead_after_seconds)
    ]
    covers: dict[PartitionId, list[tuple[int, int]]] = {}
    for report in speaking:
        for entry in report.partitions:
            covers.setdefault(entry.pid, []).append((entry.term, entry.safe_epoch))
    removable = []
    for report in all_reports:
        if report in speaking:
            continue
        if all(
            entry.pid not in live
            or any(
                term >= entry.term and safe >= entry.safe_epoch
                for term, safe in covers.get(entry.pid, [])
            )
            for entry in report.partitions
        ):
            removable.append(report.node)
    return sorted(removable)


@dataclass(frozen=True)
class ForgetImpact:
    """What ``M`` would be without one node's report."""

    safe_epoch_now: int
    safe_epoch_without: int
    partitions_lowered: tuple[PartitionId, ...]
    """Live partitions whose ``M(p)`` would fall (to another report's value
    or to ``revision - 1``)."""

    @property
    def lowers_m(self) -> bool:
        return self.safe_epoch_without < self.safe_epoch_now


def forget_impact(view: ControllerView, reports: Iterable[NodeReport], node: str) -> ForgetImpact:
    """``M`` with and without ``node``'s report, and the partitions it alone
    holds up."""
    all_reports = list(reports)
    others = [r for r in all_reports if r.node != node]
    k = sum(t.partitions for t in view.topics.values())  # every partition, not just the lowest
    with_it = join_safe_epoch(view, all_reports, k=k)
    without = join_safe_epoch(view, others, k=k)
    before = {PartitionId(w.topic, w.revision, w.partition): w.safe_epoch for w in with_it.pinning}
    lowered = tuple(
        sorted(
            PartitionId(w.topic, w.revision, w.partition)
            for w in without.pinning
            if w.safe_epoch < before.get(PartitionId(w.topic, w.revision, w.partition), -1)
        )
    )
    return ForgetImpact(with_it.safe_epoch, without.safe_epoch, lowered)
