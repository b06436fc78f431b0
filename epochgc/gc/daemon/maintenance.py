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
controller stays cheap however long the cluster runs).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from epochgc.errors import EpochGCError
from epochgc.gc.control import CollectorPausedError, DeletingJob
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.pause import PauseGuard
from epochgc.gc.run_report import delete_expired_runs
from epochgc.metrics.instruments import GcMetrics
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

log = logging.getLogger("epochgc.gc.maintenance")
daemon_log = logging.getLogger("epochgc.gc.daemon")  # the jobs' lines keep their logger


class ReportWatch:
    """Remembers since when each node's report has looked the same.

    Example::

        watch = ReportWatch()
        silent = watch.observe(store.list_objects(reports_prefix(root)), time.monotonic())
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


class LeaderMaintenance:
    """The GC leader's tidying pass (see the module docstring)."""

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        settings: MaintenanceSettings,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        future_log: FutureTimeLog | None = None,
    ) -> None:
        self._future_log = future_log
        self._store = store
        self._root = root
        self._settings = settings
        self._monotonic = monotonic
        self._now = now
        self._watch = ReportWatch()

    def run_once(self, view: ControllerView) -> MaintenanceResult:
        """One pass against the controller view ``view``.

        Raises:
            StorageError: the store failed; the next pass tries again.
        """
        result = MaintenanceResult()
        listing = list(self._store.list_objects(reports_prefix(self._root)))
        silent = self._watch.observe(listing, self._root, self._monotonic())
        if any(s >= self._settings.dead_after_seconds for s in silent.values()):
            reports, _skipped = read_reports(self._store, self._root)
            victims = removable_reports(
                reports,
                silent,
                view.live_partitions(),
                dead_after_seconds=self._settings.dead_after_seconds,
            )
            for node in victims:
                self._store.delete(report_key(self._root, node))
                log.info("deleted the report of node %s: gone, and covered by live nodes", node)
            result.reports_deleted = victims
        result.runs_deleted = delete_expired_runs(
            self._store,
            self._root,
            self._now(),
            self._settings.runs_retention,
            limit=self._settings.max_runs_per_pass,
            margin_seconds=self._settings.clock_skew_margin_seconds,
            future_log=self._future_log,
        )
        if result.runs_deleted:
            log.info("deleted %d run summaries older than the retention", result.runs_deleted)
        return result


class MaintenanceJob:
    """The ``maintenance`` job: while ``leading()`` and the pause allows
    tidying, one ``LeaderMaintenance`` pass, its counts, then
    ``tidy_presences``. Never raises for store trouble.

    Example::

        job = MaintenanceJob(maintenance, guard, controller, metrics, tidy, leading)
        job()
    """

    def __init__(
        self,
        maintenance: LeaderMaintenance,
        guard: PauseGuard,
        controller: Controller,
        metrics: GcMetrics,
        tidy_presences: Callable[[], None],
        leading: Callable[[], bool],
    ) -> None:
        self._maintenance = maintenance
        self._guard = guard
        self._controller = controller
        self._metrics = metrics
        self._tidy_presences = tidy_presences
        self._leading = leading

    def __call__(self) -> None:
        if not self._leading():
            return
        try:
            self._guard.check(DeletingJob.TIDYING)
            result = self._maintenance.run_once(self._controller.snapshot())
        except CollectorPausedError as err:
            daemon_log.info(
                "tidying held (reports, run summaries, presence documents kept): %s", err
            )
            return
        except EpochGCError as err:
            daemon_log.warning("maintenance pass failed (retried next time): %s", err)
            return
        self._metrics.maintenance_deleted.labels("report").inc(len(result.reports_deleted))
        self._metrics.maintenance_deleted.labels("run").inc(result.runs_deleted)
        self._tidy_presences()


class CompactionJob:
    """The ``compact`` job: while ``leading()`` and the pause allows
    truncating the controller log, one ``Controller.compact``. Never raises
    for store trouble: the next one retries.

    Example::

        job = CompactionJob(compactor, guard, min_entries=1000, leading=leading)
        job()
        job.last_result     # CompactionResult | None
    """

    def __init__(
        self,
        compactor: Controller,
        guard: PauseGuard,
        *,
        min_entries: int,
        leading: Callable[[], bool],
    ) -> None:
        self._compactor = compactor
        self._guard = guard
        self._min_entries = min_entries
        self._leading = leading
        self.last_result: CompactionResult | None = None

    def __call__(self) -> None:
        if not self._leading():
            return
        try:
            self._guard.check(DeletingJob.CONTROLLER_TRUNCATION)
            result = self._compactor.compact(min_entries=self._min_entries)
        except CollectorPausedError as err:
            daemon_log.info("controller compaction held (the log is not truncated): %s", err)
            return
        except EpochGCError as err:
            daemon_log.warning("controller compaction failed (the next one retries): %s", err)
            return
        self.last_result = result
        if result.skipped:
            daemon_log.debug(
                "controller compaction skipped: %d entries above the snapshot",
                result.entries_above_snapshot,
            )
