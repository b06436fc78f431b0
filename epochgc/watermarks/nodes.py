"""The nodes an operator sees (``epochgc node list``) and forgetting a gone
one (``epochgc node forget``).

A node is known by its report (``{root}/meta/reports/{node}``) and by the
leases whose holder names it (``{node}/{process suffix}``). Whether a node
is alive is judged here for display and for refusing to forget a live
node, from wall-clock times written by other machines; nothing safety
critical rests on that judgement: forgetting a report can only lower
``M`` (the command says by how much before it does it), never raise it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from epochgc.errors import InvalidArgumentError, NotFoundError, RecordError
from epochgc.storage.keys import report_key
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller, ControllerView
from epochgc.watermarks.leases import decode_lease
from epochgc.watermarks.report_lifecycle import ForgetImpact, forget_impact
from epochgc.watermarks.reports import NodeReport, read_reports


@dataclass(frozen=True)
class NodeRow:
    """One node as ``node list`` shows it."""

    node: str
    report_age_seconds: float | None
    """From the report's ``generated_at`` (another machine's clock)."""
    entries: int
    """Report entries of live topic incarnations."""
    ignored_entries: int
    """Entries of incarnations that are not live, or of a version 1 report."""
    leases_held: int
    """Unreleased leases naming this node whose holder's expiry is ahead."""

    def looks_alive(self, dead_after: timedelta) -> bool:
        """Holds a lease, or wrote its report within ``dead_after``."""
        recent = (
            self.report_age_seconds is not None
            and self.report_age_seconds < dead_after.total_seconds()
        )
        return self.leases_held > 0 or recent


def list_nodes(
    store: ObjectStore,
    root: str,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[NodeRow]:
    """Every node with a report or a lease, sorted by id (one LIST and GET
    per report and per lease)."""
    view = Controller(store, root).snapshot()
    reports, _skipped = read_reports(store, root)
    moment = now()
    return node_rows(view, reports, _held_leases(store, root, moment), moment)


def node_rows(
    view: ControllerView,
    reports: Iterable[NodeReport],
    leases: Mapping[str, int],
    moment: datetime,
) -> list[NodeRow]:
    """The rows of ``node list`` from what was read. Pure."""
    live = view.live_partitions()
    rows = {}
    for report in reports:
        counted = sum(1 for e in report.partitions if e.pid in live)
        rows[report.node] = NodeRow(
            report.node,
            max(0.0, (moment - report.generated_at).total_seconds()),
            counted,
            len(report.partitions) - counted + report.ignored_entries,
            leases.get(report.node, 0),
        )
    for node, held in leases.items():
        if node not in rows:
            rows[node] = NodeRow(node, None, 0, 0, held)
    return [rows[n] for n in sorted(rows)]


def forget_node(
    store: ObjectStore,
    root: str,
    node: str,
    *,
    dead_after: timedelta,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> ForgetImpact:
    """Delete ``node``'s report; return what that does to ``M``.

    Raises:
        InvalidArgumentError: no report of that node, or the node looks
            alive (it holds a lease or reported within ``dead_after``): it
            would only write its report again.
    """
    view = Controller(store, root).snapshot()
    reports, _skipped = read_reports(store, root)
    moment = now()
    rows = node_rows(view, reports, _held_leases(store, root, moment), moment)
    row = next((r for r in rows if r.node == node), None)
    if row is None or row.report_age_seconds is None:
        raise InvalidArgumentError(f"node {node!r} has no report to forget")
    if row.looks_alive(dead_after):
        raise InvalidArgumentError(
            f"node {node!r} looks alive ({row.leases_held} leases held, report "
            f"{row.report_age_seconds:.0f}s old, dead after "
            f"{dead_after.total_seconds():.0f}s); stop it first"
        )
    impact = forget_impact(view, reports, node)
    store.delete(report_key(root, node))
    return impact


def _held_leases(store: ObjectStore, root: str, now: datetime) -> dict[str, int]:
    held: dict[str, int] = {}
    for info in store.list_objects(f"{root}/meta/leases/"):
        try:
            doc = decode_lease(store.get(info.key).body, info.key)
        except (NotFoundError, RecordError):
            continue
        if not doc.released and doc.expires_at > now:
            node = doc.holder.rsplit("/", 1)[0]
            held[node] = held.get(node, 0) + 1
    return held
