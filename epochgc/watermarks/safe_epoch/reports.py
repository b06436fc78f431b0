"""Node reports (docs/contract.md, "Node report (version 2)"): each node publishes ``M(p)``
of the partitions it leads; the collector reads one object per node.

The document shape is a public contract: other streaming systems may write
reports themselves. ``safe_epoch`` is ``M(p)``. A report that does not parse
is skipped and counted by the reader, never guessed at: skipping can only
leave ``M`` lower (safer), never higher.

Version 2 names each entry's topic ``revision``: an entry counts only for
the incarnation it was measured on. A version 1 report (no revision) is
still read, but its entries count for nothing (``ignored_entries``): they
cannot be matched to an incarnation, and counting them for a recreated
topic could raise ``M`` above what the new incarnation allows. Its
partitions fall back to ``revision - 1``, which is safe.

An entry may carry an optional ``stuck`` object (docs/operating.md, "Stuck partitions"): the
partition cannot be reconciled past a placeholder whose L0 object is
missing or corrupt, so its ``M(p)`` cannot move. It is information for
operators (``gc epoch-info``, ``gc explain``), never an input to ``M``; an
additive optional field, so the version stays 2 and a reader that does not
know it ignores it. A ``stuck`` value that does not parse is dropped, not
guessed at and not fatal to the report: it cannot change ``M``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from epochgc.errors import MalformedRecordError, RecordError
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage import documents
from epochgc.storage.keys import (
    PartitionId,
    is_valid_node_id,
    is_valid_revision,
    is_valid_topic,
    parse_report_key,
    report_key,
    reports_prefix,
)
from epochgc.storage.object_store import ObjectStore, get_or_none
from epochgc.watermarks.partition.state import PartitionState

log = logging.getLogger(__name__)

REPORT_VERSION = 2
LEGACY_REPORT_VERSION = 1
"""Reports without revisions: read, but their entries count for nothing."""


@dataclass(frozen=True)
class StuckCause:
    """Why a partition's reconciliation cannot move (``stuck`` in a report
    entry): ``cause`` is ``missing`` or ``corrupt``, ``key`` the L0 object,
    ``first_offset..last_offset`` the records of the placeholder it stops
    at, ``since`` when the node first saw it, ``error`` the store's or the
    decoder's words."""

    cause: str
    key: str
    first_offset: int
    last_offset: int
    since: datetime
    error: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "cause": self.cause,
            "key": self.key,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "since": documents.format_time(self.since),
            "error": self.error,
        }


def decode_stuck(raw: object, where: str) -> StuckCause | None:
    """The optional ``stuck`` object of a report entry; ``None`` when absent
    or unusable (see the module docstring)."""
    if not isinstance(raw, dict):
        return None
    try:
        return StuckCause(
            cause=documents.get_str(raw, "cause", where),
            key=documents.get_str(raw, "key", where),
            first_offset=documents.get_int(raw, "first_offset", where, 0),
            last_offset=documents.get_int(raw, "last_offset", where, 0),
            since=documents.parse_time(documents.get_str(raw, "since", where), where),
            error=raw["error"] if isinstance(raw.get("error"), str) else "",
        )
    except MalformedRecordError:
        return None


SafeEpochRule = Callable[[PartitionState], int]
"""How a report computes ``M(p)`` from a led partition's state."""


def safe_epoch_rule(state: PartitionState) -> int:
    """``M(p) = min_epoch_lower_bound - 1`` (``PartitionState.safe_epoch``):
    the only rule a shipped command publishes. Nothing in the environment,
    the configuration or the command line of ``epochgc reconciler`` or any
    other node changes it; only ``epochgc verify``'s own worker processes
    compose a node with a deliberately unsafe rule
    (``epochgc/verify/worker.py``), to prove the checks catch it."""
    return state.safe_epoch


@dataclass(frozen=True)
class PartitionReport:
    """One led partition's watermark facts."""

    topic: str
    revision: int
    partition: int
    term: int
    safe_epoch: int
    lro: int
    max_applied_epoch: int
    previous_applied_epoch: int
    stuck: StuckCause | None = None

    @property
    def pid(self) -> PartitionId:
        return PartitionId(self.topic, self.revision, self.partition)

    @staticmethod
    def of(
        pid: PartitionId,
        state: PartitionState,
        stuck: StuckCause | None = None,
        *,
        rule: SafeEpochRule = safe_epoch_rule,
    ) -> PartitionReport:
        """The entry of a led partition; ``M(p)`` is ``rule(state)``, the
        safe rule unless a test build's composition passes another."""
        return PartitionReport(
            pid.topic,
            pid.revision,
            pid.partition,
            state.term,
            rule(state),
            state.lro,
            state.max_applied_epoch,
            state.previous_applied_epoch,
            stuck,
        )


@dataclass(frozen=True)
class NodeReport:
    """Everything one node says about the partitions it leads."""

    node: str
    generated_at: datetime
    partitions: tuple[PartitionReport, ...]
    ignored_entries: int = 0
    """Entries of a version 1 report, which name no revision and count for
    nothing (see the module docstring)."""


def encode_report(report: NodeReport) -> bytes:
    """The report object's bytes."""
    return documents.dump_document(
        {
            "v": REPORT_VERSION,
            "node": report.node,
            "generated_at": documents.format_time(report.generated_at),
            "partitions": [_encode_entry(p) for p in report.partitions],
        }
    )


def _encode_entry(p: PartitionReport) -> dict[str, object]:
    entry: dict[str, object] = {
        "topic": p.topic,
        "revision": p.revision,
        "partition": p.partition,
        "term": p.term,
        "safe_epoch": p.safe_epoch,
        "lro": p.lro,
        "max_applied_epoch": p.max_applied_epoch,
        "previous_applied_epoch": p.previous_applied_epoch,
    }
    if p.stuck is not None:
        entry["stuck"] = p.stuck.to_json()
    return entry


def decode_report(data: bytes, where: str = "node report") -> NodeReport:
    """Parse a node report.

    Raises:
        MalformedRecordError, UnsupportedVersionError: the whole report is
            unusable (one bad entry spoils it: the reader cannot tell which
            of its values are trustworthy).
    """
    doc = documents.load_document(data, where, REPORT_VERSION)
    legacy = doc["v"] == LEGACY_REPORT_VERSION
    node = documents.get_str(doc, "node", where)
    if not is_valid_node_id(node):
        raise MalformedRecordError(f"{where}: invalid node id {node!r}")
    generated_at = documents.parse_time(documents.get_str(doc, "generated_at", where), where)
    entries = []
    for item in documents.get_list(doc, "partitions", where, objects=True):
        topic = documents.get_str(item, "topic", where)
        if not is_valid_topic(topic):
            raise MalformedRecordError(f"{where}: invalid topic {topic!r}")
        revision = 1 if legacy else documents.get_int(item, "revision", where, 1)
        if not is_valid_revision(revision):
            raise MalformedRecordError(f"{where}: revision out of range: {revision}")
        entries.append(
            PartitionReport(
                topic=topic,
                revision=revision,
                partition=documents.get_int(item, "partition", where, 0),
                term=documents.get_int(item, "term", where, 0),
                safe_epoch=documents.get_int(item, "safe_epoch", where, -1),
                lro=documents.get_int(item, "lro", where, -1),
                max_applied_epoch=documents.get_int(item, "max_applied_epoch", where, 0),
                previous_applied_epoch=documents.get_int(item, "previous_applied_epoch", where, 0),
                stuck=decode_stuck(item.get("stuck"), where),
            )
        )
    if legacy:
        return NodeReport(node, generated_at, (), ignored_entries=len(entries))
    return NodeReport(node, generated_at, tuple(entries))


def publish_report(store: ObjectStore, root: str, report: NodeReport) -> None:
    """Write (overwrite) this node's report object."""
    store.put(report_key(root, report.node), encode_report(report))


@dataclass(frozen=True)
class SkippedReport:
    """A report object that could not be used, and why."""

    key: str
    reason: str


def read_reports(
    store: ObjectStore, root: str, *, concurrency: int = 8, runtime: Runtime = SYSTEM
) -> tuple[list[NodeReport], list[SkippedReport]]:
    """Every node's report: one LIST plus one GET per node.

    Unusable objects (a bad key, bad JSON, a newer version, a node id that
    does not match the key) are returned as skipped, with the reason.
    """
    keys = [info.key for info in store.list_objects(reports_prefix(root))]

    def load(key: str) -> NodeReport | SkippedReport:
        node_id = parse_report_key(key, root)
        if node_id is None:
            return SkippedReport(key, "key is not {root}/meta/reports/{node_id}")
        stored = get_or_none(store, key)
        if stored is None:
            return SkippedReport(key, "deleted while reading")
        try:
            report = decode_report(stored.body, key)
        except RecordError as err:
            return SkippedReport(key, str(err))
        if report.node != node_id:
            return SkippedReport(key, f"report names node {report.node!r}, key names {node_id!r}")
        return report

    results = runtime.run_requests(max(1, concurrency), "epochgc-reports", load, keys)
    reports = [r for r in results if isinstance(r, NodeReport)]
    skipped = [r for r in results if isinstance(r, SkippedReport)]
    for item in skipped:
        log.warning("skipping node report %s: %s", item.key, item.reason)
    return reports, skipped


def carried_entries(
    node: str,
    previous: Mapping[PartitionId, PartitionReport],
    led: Iterable[PartitionId],
    live: Iterable[PartitionId],
    reports: Iterable[NodeReport],
) -> dict[PartitionId, PartitionReport]:
    """The entries a node keeps publishing for partitions it no longer
    leads. Pure.

    Dropping a partition from a report the moment its lease is lost would
    lower ``M``: until the new leader reports it, no report covers it and
    it counts as ``revision - 1``. So a node carries its last entry for a
    lost partition until another node's report covers it with at least the
    same ``M(p)`` *under a newer term*, or the partition stops being live.
    Safe: the value was true when published, and ``M(p)`` only grows.

    The newer term is what keeps two carriers from dropping the partition
    together: two nodes carrying the same value, each reading the other's
    report before the other's drop lands, would both see themselves
    covered. Terms of one partition are unique to a leadership, so the
    entry with the highest term is never dropped until a newer leader
    reports.
    """
    led_keys, live_keys = set(led), set(live)
    covers: dict[PartitionId, list[tuple[int, int]]] = {}
    for report in reports:
        if report.node == node:
            continue
        for entry in report.partitions:
            covers.setdefault(entry.pid, []).append((entry.term, entry.safe_epoch))

    def covered(key: PartitionId, entry: PartitionReport) -> bool:
        return any(
            term > entry.term and safe_epoch >= entry.safe_epoch
            for term, safe_epoch in covers.get(key, [])
        )

    return {
        key: entry
        for key, entry in previous.items()
        if key not in led_keys and key in live_keys and not covered(key, entry)
    }


class NodeReporter:
    """Builds a node's successive reports: the partitions it leads, plus
    the entries of partitions it led before, carried until a newer
    leader's report covers them (``carried_entries``).

    Two processes of one node id can run at once for a while (a
    supervisor that took a stopped process for dead started another),
    each in turn holding the node lease under its own incarnation and
    writing the one report key. So:

    * a process that holds no valid node lease publishes nothing: the
      process that holds it does, and a report from here would overwrite
      what that one knows;
    * a process starts from the node's stored report at every new
      incarnation, as a fresh process does at its first report: what it
      remembers of its own last report may be older than what the other
      process published since, and carrying the older entries would move
      ``M(p)`` back.

    Each report is remembered before its PUT is sent: its entries are true
    whether or not the PUT lands, and one that lands with its answer lost
    must not be followed by a report carrying the older entries (``M``
    would dip).
    """

    def __init__(
        self, store: ObjectStore, root: str, node_id: str, *, runtime: Runtime = SYSTEM
    ) -> None:
        self._store = store
        self._root = root
        self._node_id = node_id
        self._runtime = runtime
        self._incarnation: str | None = None
        self._reported: dict[PartitionId, PartitionReport] | None = None

    def next_report(
        self,
        now: datetime,
        led: Iterable[tuple[PartitionId, PartitionState]],
        live: Iterable[PartitionId],
        *,
        incarnation: str | None,
        stuck: Mapping[PartitionId, StuckCause] | None = None,
        rule: SafeEpochRule = safe_epoch_rule,
    ) -> NodeReport | None:
        """The report to publish now (``led``: the partitions led and their
        states; ``live``: the partitions of live topics; ``incarnation``:
        the node lease's, ``None`` when it is not valid), remembered as
        published; ``None`` when there is nothing to publish (no valid
        lease).

        Raises:
            StorageError: the node's own report or the others' unreadable.
        """
        if incarnation is None:
            return None
        if incarnation != self._incarnation:
            self._incarnation, self._reported = incarnation, None
        led = list(led)
        carried = self._carried([pid for pid, _ in led], live)
        report = report_of(self._node_id, now, led, carried.values(), stuck, rule=rule)
        self._reported = {e.pid: e for e in report.partitions}
        return report

    def _carried(
        self, led: list[PartitionId], live: Iterable[PartitionId]
    ) -> dict[PartitionId, PartitionReport]:
        if self._reported is None:
            stored = get_or_none(self._store, report_key(self._root, self._node_id))
            try:
                own = None if stored is None else decode_report(stored.body)
            except RecordError as err:
                log.warning(
                    "%s: own previous report unreadable, not carried: %s", self._node_id, err
                )
                own = None
            self._reported = {} if own is None else {e.pid: e for e in own.partitions}
        if not set(self._reported) - set(led):
            return {}
        reports, _skipped = read_reports(self._store, self._root, runtime=self._runtime)
        return carried_entries(self._node_id, self._reported, led, live, reports)


def report_of(
    node: str,
    now: datetime,
    partitions: Iterable[tuple[PartitionId, PartitionState]],
    carried: Iterable[PartitionReport] = (),
    stuck: Mapping[PartitionId, StuckCause] | None = None,
    *,
    rule: SafeEpochRule = safe_epoch_rule,
) -> NodeReport:
    """Build a report from the states of the partitions ``node`` leads, plus
    the ``carried`` entries of partitions it led before; ``stuck`` gives the
    cause of each led partition that cannot be reconciled. ``rule``
    computes each led partition's ``M(p)`` (``safe_epoch_rule`` but in
    ``epochgc verify``'s unsafe test build)."""
    causes = stuck or {}
    led = [PartitionReport.of(pid, state, causes.get(pid), rule=rule) for pid, state in partitions]
    return NodeReport(node, now, tuple(sorted([*led, *carried], key=lambda e: e.pid)))
