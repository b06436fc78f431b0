"""What the GC leader tidies besides L0 objects, so that nothing grows
without bound over years: node reports of nodes that are gone (when it
costs ``M`` nothing, ``watermarks.safe_epoch.lifecycle``) and run summaries
older than ``gc.runs_retention_days`` by the store's timestamps (not the
writing collector's clock, ``run_report.expired_runs``).

The daemon runs ``LeaderMaintenance.run_once`` every
``gc.maintenance_interval_seconds`` while it holds the ``gc`` lease. The
silence of a report is measured here, on this process's monotonic clock,
from the ETags the reports LIST returns: a leader that just took over has
seen nothing yet, so it deletes no report before it has watched one stay
unchanged for ``reports.dead_after_seconds`` itself.

The daemon's leader-only housekeeping jobs live here too, each holding
while a pause holds its kind of deletion: ``MaintenanceJob`` (the
``maintenance`` job: one pass, then ``presence.PresenceTidy``) and
``CompactionJob`` (the ``compact`` job: ``Controller.compact`` snapshots the
controller log and deletes the entries the snapshot covers, so opening the
controller stays cheap however long the cluster runs). ``tidying_pass`` is
how each of them, and ``presence_jobs.PresenceTidy``, runs one pass: a pause or a
store failure is logged and the next pass tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from epochgc.errors import CollectorPausedError, EpochGCError
from epochgc.gc.control import DeletingJob
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.pause import PauseGuard
from epochgc.gc.run_report import delete_expired_runs
from epochgc.metrics.instruments import GcMetrics
from epochgc.runtime import SYSTEM
from epochgc.storage.keys import parse_report_key, report_key, reports_prefix
from epochgc.storage.object_store import ObjectInfo, ObjectStore
from epochgc.storage.stored_time import DEFAULT_MARGIN_SECONDS
from epochgc.watermarks.controller import (
    CompactionResult,
    Controller,
    ControllerView,
)
from epochgc.watermarks.safe_epoch.lifecycle import removable_reports
from epochgc.watermarks.safe_epoch.reports import read_reports

log = logging.getLogger(__name__)

T = TypeVar("T")


class ReportWatch:
    """Remembers since when each node's report has looked the same.

    Example::

        watch = ReportWatch()
        silent = watch.observe(store.list_objects(reports_prefix(root)), root, monotonic())
    """

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, float]] = {}

    def observe(self, listing: Iterable[ObjectInfo], root: str, now: float) -> dict[str, float]:
        """Record one listing; return each node's seconds without change."""
        current: dict[str, tuple[str, float]] = {}
        for info in listing:
            node = parse_report_key(info.key, root)
            if node is None:
                continue
            etag, since = self._seen.get(node, (info.etag, now))
            current[node] = (info.etag, since) if etag == info.etag else (info.etag, now)
        self._seen = current
        return {node: now - since for node, (_etag, since) in current.items()}


@dataclass(frozen=True)
class MaintenanceSettings:
    """How the leader tidies.

    Attributes:
        dead_after_seconds: a report unchanged this long (as this process
            saw it) belongs to a node that is gone. Safety does not depend
            on it: a report is only deleted when others cover it.
        runs_retention: run summaries (and plans) older than this go.
        max_runs_per_pass: bounds one pass's deletions.
    """

    dead_after_seconds: float = 600.0
    runs_retention: timedelta = timedelta(days=30)
    max_runs_per_pass: int = 1000
    clock_skew_margin_seconds: float = DEFAULT_MARGIN_SECONDS
    """A store timestamp ahead of this clock by more than this is unknown:
    that run is kept."""


@dataclass
class MaintenanceResult:
    """What one pass deleted."""

    reports_deleted: list[str] = field(default_factory=list)
    runs_deleted: int = 0


@dataclass(eq=False)
class LeaderMaintenance:
    """The GC leader's tidying pass (see the module docstring)."""

    store: ObjectStore
    root: str
    settings: MaintenanceSettings
    _: KW_ONLY
    monotonic: Callable[[], float] = SYSTEM.monotonic
    now: Callable[[], datetime] = SYSTEM.wall
    future_log: FutureTimeLog | None = None
    _watch: ReportWatch = field(default_factory=ReportWatch, init=False)

    def run_once(self, view: ControllerView) -> MaintenanceResult:
        """One pass against the controller view ``view``.

        Raises:
            StorageError: the store failed; the next pass tries again.
        """
        result = MaintenanceResult()
        listing = list(self.store.list_objects(reports_prefix(self.root)))
        silent = self._watch.observe(listing, self.root, self.monotonic())
        if any(s >= self.settings.dead_after_seconds for s in silent.values()):
            reports, _skipped = read_reports(self.store, self.root)
            victims = removable_reports(
                reports,
                silent,
                view.live_partitions(),
                dead_after_seconds=self.settings.dead_after_seconds,
            )
            for node in victims:
                self.store.delete(report_key(self.root, node))
                log.info("deleted the report of node %s: gone, and covered by live nodes", node)
            result.reports_deleted = victims
        result.runs_deleted = delete_expired_runs(
            self.store,
            self.root,
            self.now(),
            self.settings.runs_retention,
            limit=self.settings.max_runs_per_pass,
            margin_seconds=self.settings.clock_skew_margin_seconds,
            future_log=self.future_log,
        )
        if result.runs_deleted:
            log.info("deleted %d run summaries older than the retention", result.runs_deleted)
        return result


def tidying_pass(step: Callable[[], T], *, held: str, failed: str) -> T | None:
    """Run one pass of a leader's tidying job: ``step``'s result, or
    ``None`` when a pause holds it (logged at INFO, ``held``) or the store
    failed (WARNING, ``failed``); each wording takes the error for its one
    ``%s``. Either way the next pass tries again.

    Example::

        result = tidying_pass(step, held="tidying held: %s", failed="tidying failed: %s")
    """
    try:
        return step()
    except CollectorPausedError as err:
        log.info(held, err)
    except EpochGCError as err:
        log.warning(failed, err)
    return None


@dataclass(eq=False)
class MaintenanceJob:
    """The ``maintenance`` job: while ``leading()`` and the pause allows
    tidying, one ``LeaderMaintenance`` pass, its counts, then
    ``tidy_presences``. Never raises for store trouble.

    Example::

        job = MaintenanceJob(maintenance, guard, controller, metrics, tidy, leading)
        job()
    """

    maintenance: LeaderMaintenance
    guard: PauseGuard
    controller: Controller
    metrics: GcMetrics
    tidy_presences: Callable[[], None]
    leading: Callable[[], bool]

    def __call__(self) -> None:
        if not self.leading():
            return
        result = tidying_pass(
            self._run_once,
            held="tidying held (reports, run summaries, presence documents kept): %s",
            failed="maintenance pass failed (retried next time): %s",
        )
        if result is None:
            return
        self.metrics.maintenance_deleted.labels("report").inc(len(result.reports_deleted))
        self.metrics.maintenance_deleted.labels("run").inc(result.runs_deleted)
        self.tidy_presences()

    def _run_once(self) -> MaintenanceResult:
        self.guard.check(DeletingJob.TIDYING)
        return self.maintenance.run_once(self.controller.snapshot())


@dataclass(eq=False)
class CompactionJob:
    """The ``compact`` job: while ``leading()`` and the pause allows
    truncating the controller log, one ``Controller.compact``. Never raises
    for store trouble: the next one retries.

    Example::

        job = CompactionJob(compactor, guard, min_entries=1000, leading=leading)
        job()
        job.last_result     # CompactionResult | None
    """

    compactor: Controller
    guard: PauseGuard
    _: KW_ONLY
    min_entries: int
    leading: Callable[[], bool]
    last_result: CompactionResult | None = field(default=None, init=False)

    def __call__(self) -> None:
        if not self.leading():
            return
        result = tidying_pass(
            self._compact,
            held="controller compaction held (the log is not truncated): %s",
            failed="controller compaction failed (the next one retries): %s",
        )
        if result is None:
            return
        self.last_result = result
        if result.skipped:
            log.debug(
                "controller compaction skipped: %d entries above the snapshot",
                result.entries_above_snapshot,
            )

    def _compact(self) -> CompactionResult:
        self.guard.check(DeletingJob.CONTROLLER_TRUNCATION)
        return self.compactor.compact(min_entries=self.min_entries)
