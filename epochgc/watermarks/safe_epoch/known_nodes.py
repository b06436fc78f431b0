"""The nodes an operator sees (``epochgc node list``) and forgetting a gone
one (``epochgc node forget``).

A node is known by its report (``{root}/meta/reports/{node}``), its node
lease (``{root}/meta/nodes/{node}``) and the singleton leases whose holder
names it (``{node}/{process suffix}``). The partitions it owns are the
ownership records (``{root}/meta/owners/...``) naming its current
incarnation. Whether a node is alive is judged here for display and for
refusing to forget a live node, from wall-clock times written by other
machines; nothing safety critical rests on that judgement (the nodes
themselves judge each other by ETag changes on their own monotonic
clocks): forgetting a report can only lower ``M`` (the command says by how
much before it does it), never raise it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from epochgc.errors import InvalidArgumentError, NotFoundError, RecordError
from epochgc.leases.holder_codec import (
    NodeLeaseDocument,
    OwnerDocument,
    decode_node_lease,
    decode_owner,
)
from epochgc.leases.role_leases import decode_lease
from epochgc.storage.keys import (
    nodes_prefix,
    owners_prefix,
    parse_node_lease_key,
    parse_owner_key,
    report_key,
)
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller, ControllerView
from epochgc.watermarks.safe_epoch.lifecycle import ForgetImpact, forget_impact
from epochgc.watermarks.safe_epoch.reports import NodeReport, read_reports


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
    """Unreleased singleton leases (``gc``, ``ticker``) naming this node
    whose holder's expiry is ahead."""
    lease: str = "none"
    """Its node lease: ``live`` (unreleased, expiry ahead by the reader's
    clock), ``released`` (a clean stop), ``expired`` (stopped renewing:
    killed, or cut off) or ``none``."""
    incarnation: str | None = None
    """The node lease's incarnation (changes at every process start)."""
    partitions_owned: int = 0
    """Ownership records naming this node's current incarnation, unreleased."""

    def looks_alive(self, dead_after: timedelta) -> bool:
        """Holds a live node lease or a singleton lease, or wrote its report
        within ``dead_after``."""
        recent = (
            self.report_age_seconds is not None
            and self.report_age_seconds < dead_after.total_seconds()
        )
        return self.leases_held > 0 or self.lease == "live" or recent


def list_nodes(
    store: ObjectStore,
    root: str,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[NodeRow]:
    """Every node with a report, a node lease or a singleton lease, sorted
    by id (one LIST and GET per report, lease and ownership record; the
    records are read 16 at a time)."""
    view = Controller(store, root).snapshot()
    reports, _skipped = read_reports(store, root)
    moment = now()
    return node_rows(
        view,
        reports,
        _held_leases(store, root, moment),
        moment,
        node_leases=read_node_leases(store, root),
        owners=read_owners(store, root),
    )


def read_node_leases(store: ObjectStore, root: str) -> dict[str, NodeLeaseDocument]:
    """Every readable node lease, by node id."""
    out: dict[str, NodeLeaseDocument] = {}
    for info in store.list_objects(nodes_prefix(root)):
        node = parse_node_lease_key(info.key, root)
        if node is None:
            continue
        try:
            out[node] = decode_node_lease(store.get(info.key).body, info.key)
        except (NotFoundError, RecordError):
            continue
    return out


def read_owners(store: ObjectStore, root: str) -> list[OwnerDocument]:
    """Every readable ownership record (16 GETs in flight)."""
    keys = [i.key for i in store.list_objects(owners_prefix(root)) if parse_owner_key(i.key, root)]

    def one(key: str) -> OwnerDocument | None:
        try:
            return decode_owner(store.get(key).body, key)
        except (NotFoundError, RecordError):
            return None

    with ThreadPoolExecutor(max_workers=16) as pool:
        return [doc for doc in pool.map(one, keys) if doc is not None]


def lease_state(doc: NodeLeaseDocument | None, moment: datetime) -> str:
    """``live``, ``released``, ``expired`` or ``none``, by ``moment``. Pure."""
    if doc is None:
        return "none"
    if doc.released:
        return "released"
    return "live" if doc.expires_at > moment else "expired"


def node_rows(
    view: ControllerView,
    reports: Iterable[NodeReport],
    leases: Mapping[str, int],
    moment: datetime,
    *,
    node_leases: Mapping[str, NodeLeaseDocument] | None = None,
    owners: Iterable[OwnerDocument] = (),
) -> list[NodeRow]:
    """The rows of ``node list`` from what was read. Pure."""
    live = view.live_partitions()
    node_leases = node_leases or {}
    owned: dict[str, int] = {}
    for record in owners:
        doc = node_leases.get(record.node)
        if not record.released and doc is not None and doc.incarnation == record.incarnation:
            owned[record.node] = owned.get(record.node, 0) + 1

    def row(node: str, age: float | None, entries: int, ignored: int) -> NodeRow:
        doc = node_leases.get(node)
        return NodeRow(
            node,
            age,
            entries,
            ignored,
            leases.get(node, 0),
            lease_state(doc, moment),
            None if doc is None else doc.incarnation,
            owned.get(node, 0),
        )

    rows = {}
    for report in reports:
        counted = sum(1 for e in report.partitions if e.pid in live)
        rows[report.node] = row(
            report.node,
            max(0.0, (moment - report.generated_at).total_seconds()),
            counted,
            len(report.partitions) - counted + report.ignored_entries,
        )
    for node in [*leases, *node_leases]:
        if node not in rows:
            rows[node] = row(node, None, 0, 0)
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
    rows = node_rows(
        view,
        reports,
        _held_leases(store, root, moment),
        moment,
        node_leases=read_node_leases(store, root),
    )
    row = next((r for r in rows if r.node == node), None)
    if row is None or row.report_age_seconds is None:
        raise InvalidArgumentError(f"node {node!r} has no report to forget")
    if row.looks_alive(dead_after):
        raise InvalidArgumentError(
            f"node {node!r} looks alive (node lease {row.lease}, {row.leases_held} "
            f"singleton leases held, report "
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
