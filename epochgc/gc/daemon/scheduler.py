"""The GC daemon: APScheduler jobs wired to the collector, the GC lease and
the metrics endpoint. No GC logic lives here (that is ``collector``).

Jobs (all in one ``BackgroundScheduler``):

* ``gc``: one collector round, interval ``[daemon] interval_seconds``,
  ``max_instances=1``, ``coalesce``, ``misfire_grace_time``. It runs only
  while this daemon holds the ``gc`` lease (standby otherwise: several
  daemons may run, one collects). After each round it moves its own next
  fire time: soon after progress, at the next epoch tick or when the
  youngest too-young object ages in when idle (``next_round_delay``).
* ``lease``: a standby daemon tries to take the ``gc`` lease; on success the
  ``gc`` job fires at once. The lease manager's heartbeat renews it.
* ``control``: reads ``{root}/gc/control.json`` (pause / resume / reset); a
  pause stops a sweep in progress after its batches in flight. On resume,
  every job the pause held runs at once.
* The epoch ticker (``watermarks.ticker``, its own thread, not a job): with
  ``ticker`` on, this daemon competes for the cluster's one ``ticker``
  lease, independently of the ``gc`` lease, and ticks while it holds it.
* ``reports``: logs node reports older than ``report_stale_seconds`` and
  samples each node's report age for the metrics.
* ``presence``: every ``presence_interval_seconds`` (and, through the
  ``lease`` job, soon after every change of role), writes this daemon's
  ``{root}/gc/daemons/{node_id}`` (leader or standby; ``gc.presence``),
  deleted on a clean stop.
* ``maintenance``: while this daemon holds the lease, deletes the reports of
  gone nodes (when that costs ``M`` nothing), expired run summaries
  (``gc.daemon.maintenance``) and the presence documents of gone daemons.
* ``compact``: while this daemon holds the lease, every
  ``[controller] compact_interval_seconds``, snapshots the controller log
  and deletes the entries the snapshot covers (``Controller.compact``), so
  opening the controller stays cheap however long the cluster runs.

``stop()`` (SIGTERM in ``epochgc daemon``): state ``stopping``, the round in
progress finishes its DeleteObjects batches in flight and stops, the
scheduler shuts down, the ticker stops, the leases are released (a standby
takes over at once), state ``stopped``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from apscheduler.executors.pool import ThreadPoolExecutor as JobThreadPool
from apscheduler.schedulers.background import BackgroundScheduler

from epochgc.errors import EpochGCError
from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import (
    Collector,
    RoundOutcome,
    RoundReport,
    ScheduleSettings,
    next_round_delay,
)
from epochgc.gc.control import (
    CollectorPausedError,
    CollectorState,
    DeletingJob,
    HeldJob,
    StatusDocument,
    read_control,
    write_status,
)
from epochgc.gc.daemon.health import (
    RENEWAL,
    Contact,
    HealthPolicy,
    HealthSample,
    assess_health,
    record_failure,
    record_ok,
)
from epochgc.gc.daemon.maintenance import LeaderMaintenance, MaintenanceSettings
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.janitor import Janitor
from epochgc.gc.pause import GuardedStore, PauseGuard
from epochgc.gc.presence import (
    PresenceDocument,
    delete_presence,
    gone_daemons,
    read_presences,
    write_presence,
)
from epochgc.leases.role_leases import LeaseManager
from epochgc.leases.timing import LeasePolicy
from epochgc.metrics.custom_collectors import PinningCollector, PinningSample
from epochgc.metrics.instruments import (
    CollectorRegistry,
    GcMetrics,
    TickerSample,
    register_report_ages,
    register_s3_requests,
    register_ticker,
)
from epochgc.metrics.server import MetricsServer
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.stored_time import find_future, stored_age_seconds
from epochgc.watermarks.controller import CompactionPolicy, CompactionResult, Controller
from epochgc.watermarks.safe_epoch.reports import read_reports
from epochgc.watermarks.ticker import EpochTicker

log = logging.getLogger("epochgc.gc.daemon")

GC_LEASE = "gc"


@dataclass(frozen=True)
class DaemonSettings:
    """Everything the daemon needs besides the store."""

    node_id: str
    collect: CollectSettings
    schedule: ScheduleSettings
    lease: LeasePolicy
    misfire_grace_seconds: float = 30.0
    control_poll_seconds: float = 5.0
    ticker: bool = True
    """May hold the cluster's one ticker role (``[epoch] ticker``); ticks
    every ``schedule.epoch_interval`` while it does."""
    reports_check_seconds: float = 10.0
    report_stale_seconds: float = 120.0
    blocked_after_failures: int = 3
    metrics_listen: str = ""
    maintenance: MaintenanceSettings = field(default_factory=MaintenanceSettings)
    maintenance_interval_seconds: float = 300.0
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    presence_interval_seconds: float = 60.0
    """How often this daemon refreshes its presence document (one PUT)."""


class GcDaemon:
    """The scheduled collector.

    Example::

        daemon = GcDaemon(store, stats, "epochgc", settings)
        daemon.start()
        ...
        daemon.stop()      # finishes the batch in flight, releases the lease

    Args:
        registry: where the metrics go (a fresh one when omitted).
    """

    def __init__(
        self,
        store: ObjectStore,
        stats: RequestStats,
        root: str,
        settings: DaemonSettings,
        *,
        registry: CollectorRegistry | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._root = root
        self._settings = settings
        self.registry = registry or CollectorRegistry()
        self.metrics = GcMetrics(self.registry)
        register_s3_requests(self.registry, stats)
        self.registry.register(PinningCollector(self._pinning_sample))
        self.metrics.round_interval.set(settings.schedule.longest_wait.total_seconds())
        self._last_clean = time.time()
        self.metrics.sweep_lag.set_function(lambda: max(0.0, time.time() - self._last_clean))
        # Every deleting job gets a store that asks this guard before each
        # delete request; the raw store serves the daemon's own documents.
        self.pause_guard = PauseGuard(store, root, on_change=self._on_held_change)
        self._margin = settings.collect.clock_skew_margin_seconds
        self.future_log = FutureTimeLog(
            on_found=lambda document: self.metrics.future_times.labels(document).inc()
        )
        self.collector = Collector(
            store,
            stats,
            root,
            settings.collect,
            blocked_after=settings.blocked_after_failures,
            janitor=Janitor(self._guarded(DeletingJob.JANITOR), root),
            janitor_interval_seconds=settings.maintenance_interval_seconds,
            guard=self.pause_guard,
            writer=settings.node_id,
            future_log=self.future_log,
        )
        self._tidy_store = self._guarded(DeletingJob.TIDYING)
        self.maintenance = LeaderMaintenance(
            self._tidy_store, root, settings.maintenance, future_log=self.future_log
        )
        self.leases = LeaseManager(
            store,
            root,
            settings.node_id,
            policy=settings.lease,
            on_lost=self._on_lease_lost,
            now=now,
        )
        self.ticker = (
            EpochTicker(
                self.leases,
                self.collector.controller.tick,
                interval_seconds=settings.schedule.epoch_interval.total_seconds(),
                poll_seconds=settings.lease.renew_interval_seconds,
            )
            if settings.ticker
            else None
        )
        register_ticker(self.registry, self._ticker_sample)
        self._report_times: dict[str, datetime] = {}
        register_report_ages(self.registry, self._report_ages)
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": JobThreadPool(max_workers=6)},
            job_defaults={"coalesce": True, "max_instances": 1},
        )
        self._metrics_server = (
            MetricsServer(self.registry, settings.metrics_listen, self.health)
            if settings.metrics_listen
            else None
        )
        # Its own controller: it keeps the configured epoch history, which
        # the snapshots it writes carry.
        self._compactor = Controller(
            self._guarded(DeletingJob.CONTROLLER_TRUNCATION),
            root,
            epoch_history=settings.compaction.epoch_history,
        )
        self.last_compaction: CompactionResult | None = None
        self._round_stop = threading.Event()
        self._stopping = threading.Event()
        self._started = False
        self.last_report: RoundReport | None = None
        self.rounds = 0
        self._next_round_at: datetime | None = None
        # Liveness: the latest outcome of each kind of store contact, on the
        # monotonic clock (``gc.daemon.health``). A store the daemon cannot reach
        # for a lease TTL makes /healthz answer 503.
        self._health_policy = HealthPolicy(
            unreachable_after_seconds=settings.lease.ttl_seconds,
            renewal_grace_seconds=settings.lease.renew_interval_seconds,
        )
        self._contacts: dict[str, Contact] = {}
        self._contacts_lock = threading.Lock()
        self._renew_failures_seen = 0
        self._started_at = datetime.now(UTC)
        self._ticker_failures_seen = 0
        self._presence_lock = threading.Lock()
        self._presence_role: str | None = None
        """The role the presence document last showed (None: not written)."""

    # --- lifecycle -----------------------------------------------------------

    @property
    def metrics_url(self) -> str | None:
        return self._metrics_server.url if self._metrics_server is not None else None

    @property
    def is_leader(self) -> bool:
        return self.leases.grant(GC_LEASE) is not None

    def held_jobs(self) -> tuple[HeldJob, ...]:
        """The deleting jobs the pause holds now (empty while running)."""
        return self.pause_guard.held()

    def start(self) -> None:
        """Start serving metrics, heartbeats and the jobs.

        Raises:
            RuntimeError: already started.
        """
        if self._started:
            raise RuntimeError("daemon already started")
        if self._metrics_server is not None:
            self._metrics_server.start()  # first: a port in use stops us before any lease
        self._started = True
        self._started_at = datetime.now(UTC)
        self._poll_control()
        self.leases.start()
        s = self._settings
        now = datetime.now(UTC)
        self._scheduler.add_job(
            self._lease_job,
            "interval",
            seconds=s.lease.renew_interval_seconds,
            id="lease",
            next_run_time=now,
        )
        self._scheduler.add_job(
            self._gc_job,
            "interval",
            seconds=s.schedule.interval.total_seconds(),
            id="gc",
            misfire_grace_time=max(1, int(s.misfire_grace_seconds)),
            next_run_time=now,
        )
        self._scheduler.add_job(
            self._poll_control, "interval", seconds=s.control_poll_seconds, id="control"
        )
        self._scheduler.add_job(
            self._reports_job,
            "interval",
            seconds=s.reports_check_seconds,
            id="reports",
            next_run_time=now,
        )
        self._scheduler.add_job(
            self._presence_job,
            "interval",
            seconds=s.presence_interval_seconds,
            id="presence",
            next_run_time=now,
        )
        self._scheduler.add_job(
            self._maintenance_job,
            "interval",
            seconds=s.maintenance_interval_seconds,
            id="maintenance",
        )
        self._scheduler.add_job(
            self._compact_job,
            "interval",
            seconds=s.compaction.interval_seconds,
            id="compact",
            misfire_grace_time=max(1, int(s.misfire_grace_seconds)),
        )
        self._scheduler.start()
        if self.ticker is not None:
            self.ticker.start()
        log.info(
            "gc daemon %s started (round interval %.0fs, metrics %s)",
            self.leases.holder,
            s.schedule.interval.total_seconds(),
            self.metrics_url or "off",
        )

    def stop(self) -> None:
        """Finish the batch in flight, release the lease, stop. Idempotent."""
        if not self._started or self._stopping.is_set():
            return
        self._stopping.set()
        self.collector.begin_stopping()
        self.metrics.set_state(CollectorState.STOPPING.value)
        self._round_stop.set()
        started = time.monotonic()
        self._scheduler.shutdown(wait=True)
        was_leader = self.is_leader
        self.collector.mark_stopped()
        self.metrics.set_state(CollectorState.STOPPED.value)
        if was_leader:
            self._publish_status(None)
        if self.ticker is not None:
            self.ticker.stop(release=True)
        self.leases.stop(release=True)
        try:
            with self._presence_lock:  # after any write in flight
                delete_presence(self._store, self._root, self._settings.node_id)
        except EpochGCError as err:
            log.warning("could not delete this daemon's presence document: %s", err)
        self.metrics.leader.set(0)
        if self._metrics_server is not None:
            self._metrics_server.stop()
        log.info("gc daemon stopped in %.1fs", time.monotonic() - started)

    def trigger_round(self) -> None:
        """Run the ``gc`` job as soon as possible (a lease was won, a pause
        lifted)."""
        if self._stopping.is_set():
            return
        with contextlib.suppress(LookupError):  # the job is gone: shutting down
            self._scheduler.modify_job("gc", next_run_time=datetime.now(UTC))

    def health(self) -> tuple[bool, dict[str, object]]:
        """For ``/healthz``: unhealthy (with the reasons, most important
        first) when stopped, ``safety_blocked``, the scheduler died, a kind
        of store contact has failed for a lease TTL, or the leader's lease
        renewals keep failing (``gc.daemon.health.assess_health``)."""
        state = self.collector.state
        report = self.last_report
        leader = self.is_leader
        now = time.monotonic()
        with self._contacts_lock:
            contacts = dict(self._contacts)
        reasons = assess_health(
            HealthSample(
                state=state.value,
                blocked_reason=self.collector.blocked_reason,
                scheduler_running=self._scheduler.running,
                leader=leader,
                contacts=contacts,
            ),
            now,
            self._health_policy,
        )
        details: dict[str, object] = {
            "reason": reasons[0] if reasons else None,
            "reasons": reasons,
            "state": state.value,
            "leader": leader,
            "holder": self.leases.holder,
            "ticker": self.ticker is not None and self.ticker.held,
            "safe_epoch": self.collector.tracker.current.safe_epoch
            if self.collector.tracker.current
            else None,
            "last_outcome": report.outcome.value if report else None,
            "last_success_at": self.collector.last_success_at,
            "next_round_at": self._next_round_at,
            "store": {
                kind: {
                    "ok_seconds_ago": None
                    if c.last_ok_at is None
                    else round(now - c.last_ok_at, 1),
                    "failing_for_seconds": None
                    if c.failing_since is None
                    else round(now - c.failing_since, 1),
                    "last_error": c.last_error or None,
                }
                for kind, c in sorted(contacts.items())
            },
        }
        return not reasons, details

    def _contact(self, kind: str, error: EpochGCError | str | None = None) -> None:
        """Record the outcome of one store contact of ``kind`` (``None``: it
        succeeded)."""
        now = time.monotonic()
        with self._contacts_lock:
            current = self._contacts.get(kind, Contact())
            self._contacts[kind] = (
                record_ok(current, now)
                if error is None
                else record_failure(
                    current,
                    now,
                    f"{type(error).__name__}: {error}"
                    if isinstance(error, EpochGCError)
                    else error,
                )
            )

    # --- jobs ----------------------------------------------------------------

    def _gc_job(self) -> None:
        if self._stopping.is_set():
            return
        if not self.is_leader:
            self.metrics.leader.set(0)
            return
        self.metrics.leader.set(1)
        self._round_stop = threading.Event()
        if self._stopping.is_set():
            return
        started = time.monotonic()
        report = self.collector.run_round(stop=self._round_stop)
        failed = report.outcome is RoundOutcome.FAILED
        self._contact("round", (report.error or "the round failed") if failed else None)
        self.rounds += 1
        self.last_report = report
        self._observe(report, time.monotonic() - started)
        delay = self._delay_after(report)
        self._next_round_at = datetime.now(UTC) + delay
        if not self._stopping.is_set():
            with contextlib.suppress(LookupError):
                self._scheduler.modify_job("gc", next_run_time=self._next_round_at)
        self._publish_status(report)

    def _lease_job(self) -> None:
        if self._stopping.is_set():
            return
        self._sample_heartbeats()
        if self._presence_role not in (None, self._role()):
            self._presence_job()  # the role changed since the last write: show it now
        if self.is_leader:
            return
        try:
            grant = self.leases.try_acquire(GC_LEASE)
        except EpochGCError as err:
            self._contact("lease", err)
            log.warning("could not try the gc lease: %s", err)
            return
        self._contact("lease")
        if grant is not None:
            self._contact(RENEWAL)  # a fresh grant: earlier renewal failures are over
            log.info("gc daemon %s holds the gc lease (term %d)", self.leases.holder, grant.term)
            self.metrics.leader.set(1)
            self.trigger_round()

    def _sample_heartbeats(self) -> None:
        """Turn the lease heartbeat's and the ticker's failure counters into
        store contacts: they run on their own threads and only count."""
        failures = self.leases.stats["renew_failures"]
        if failures > self._renew_failures_seen:
            self._contact(
                RENEWAL,
                f"{failures - self._renew_failures_seen} lease renewals failed since the last "
                "check (the daemon log has the errors)",
            )
        elif self.leases.held():
            self._contact(RENEWAL)
        self._renew_failures_seen = failures
        if self.ticker is not None and self.ticker.held:
            ticks_failed = self.ticker.failures
            if ticks_failed > self._ticker_failures_seen:
                self._contact("ticker", "epoch ticks failing (the daemon log has the errors)")
            else:
                self._contact("ticker")
            self._ticker_failures_seen = ticks_failed
        else:
            with self._contacts_lock:
                self._contacts.pop("ticker", None)  # not ticking: nothing of ours fails

    def _poll_control(self) -> None:
        try:
            control, _etag = read_control(self._store, self._root)
        except EpochGCError as err:
            self._contact("control", err)
            log.warning("could not read the gc control document (keeping state): %s", err)
            return
        self._contact("control")
        before = self.collector.state
        self.collector.apply_control(control)
        after = self.collector.state
        self.metrics.set_state(after.value)
        if after is CollectorState.PAUSED and before is not CollectorState.PAUSED:
            self._round_stop.set()  # a sweep in progress stops after its batches in flight
        if before is CollectorState.PAUSED and after is not CollectorState.PAUSED:
            self._run_held_jobs()
        if before is not CollectorState.RUNNING and after is CollectorState.RUNNING:
            self.trigger_round()
        if before is not after and self.is_leader:
            self._publish_status(self.last_report)

    def _role(self) -> str:
        return "leader" if self.is_leader else "standby"

    def _presence_job(self) -> None:
        """Write this daemon's presence document. Serialised, and the role
        is read inside the lock, so the last write shows the current role
        (the ``lease`` job calls it too when the role changed)."""
        with self._presence_lock:
            if self._stopping.is_set():
                return
            role = self._role()
            doc = PresenceDocument(
                node=self._settings.node_id,
                holder=self.leases.holder,
                role=role,
                state=self.collector.state.value,
                started_at=self._started_at,
                updated_at=datetime.now(UTC),
                refresh_seconds=self._settings.presence_interval_seconds,
                metrics=self.metrics_url,
            )
            try:
                write_presence(self._store, self._root, doc)
            except EpochGCError as err:
                self._contact("presence", err)
                log.warning("could not write this daemon's presence document: %s", err)
                return
            self._presence_role = role
            self._contact("presence")

    def _ticker_sample(self) -> TickerSample:
        t = self.ticker
        if t is None:
            return TickerSample(eligible=False, held=False, ticks=0, failures=0)
        return TickerSample(eligible=True, held=t.held, ticks=t.ticks, failures=t.failures)

    def _compact_job(self) -> None:
        if self._stopping.is_set() or not self.is_leader:
            return
        try:
            self.pause_guard.check(DeletingJob.CONTROLLER_TRUNCATION)
            result = self._compactor.compact(min_entries=self._settings.compaction.min_entries)
        except CollectorPausedError as err:
            log.info("controller compaction held (the log is not truncated): %s", err)
            return
        except EpochGCError as err:
            log.warning("controller compaction failed (the next one retries): %s", err)
            return
        self.last_compaction = result
        if result.skipped:
            log.debug(
                "controller compaction skipped: %d entries above the snapshot",
                result.entries_above_snapshot,
            )

    def _reports_job(self) -> None:
        try:
            reports, skipped = read_reports(self._store, self._root)
        except EpochGCError as err:
            self._contact("reports", err)
            log.warning("could not read node reports: %s", err)
            return
        self._contact("reports")
        if skipped:
            log.warning(
                "%d node reports could not be read and were skipped: %s",
                len(skipped),
                ", ".join(item.key for item in skipped[:10]),
            )
        self._report_times = {r.node: r.generated_at for r in reports}
        now = datetime.now(UTC)
        self._note_future(
            "report", "generated_at", [(r.node, r.generated_at) for r in reports], now
        )
        ages = self._report_ages()
        stale = sorted(n for n, age in ages.items() if age > self._settings.report_stale_seconds)
        if stale:
            log.warning(
                "stale node reports (older than %.0fs): %s; M may be held back by them",
                self._settings.report_stale_seconds,
                ", ".join(stale[:10]),
            )

    def _maintenance_job(self) -> None:
        if self._stopping.is_set() or not self.is_leader:
            return
        try:
            self.pause_guard.check(DeletingJob.TIDYING)
            view = self.collector.controller.snapshot()
            result = self.maintenance.run_once(view)
        except CollectorPausedError as err:
            log.info("tidying held (reports, run summaries, presence documents kept): %s", err)
            return
        except EpochGCError as err:
            log.warning("maintenance pass failed (retried next time): %s", err)
            return
        self.metrics.maintenance_deleted.labels("report").inc(len(result.reports_deleted))
        self.metrics.maintenance_deleted.labels("run").inc(result.runs_deleted)
        self._tidy_presences()

    def _tidy_presences(self) -> None:
        """Delete the presence documents of daemons gone for good (through
        the tidying job's guarded store: a pause stops it too)."""
        try:
            docs, _unreadable = read_presences(self._store, self._root)
            now = datetime.now(UTC)
            self._note_future(
                "presence", "updated_at", [(d.holder, d.updated_at) for d in docs], now
            )
            gone = gone_daemons(
                docs,
                now,
                grace_seconds=self._settings.maintenance.dead_after_seconds,
                keep=self._settings.node_id,
                margin_seconds=self._margin,
            )
            for node in gone:
                delete_presence(self._tidy_store, self._root, node)
                log.info("deleted the presence document of gone daemon %s", node)
                self.metrics.maintenance_deleted.labels("presence").inc()
        except CollectorPausedError as err:
            log.info("tidying of presence documents held: %s", err)
        except EpochGCError as err:
            log.warning("tidying daemon presence documents failed (retried next time): %s", err)

    def _guarded(self, job: DeletingJob) -> GuardedStore:
        return GuardedStore(self._store, self.pause_guard, job)

    def _run_held_jobs(self) -> None:
        """The pause is over: forget the holds and run the held jobs now
        (the round's janitor is still due and goes with the next round)."""
        held = {h.job for h in self.pause_guard.release_all()}
        if self._stopping.is_set():
            return
        now = datetime.now(UTC)
        for job_id, job in (
            ("compact", DeletingJob.CONTROLLER_TRUNCATION),
            ("maintenance", DeletingJob.TIDYING),
        ):
            if job in held:
                with contextlib.suppress(LookupError):  # shutting down
                    self._scheduler.modify_job(job_id, next_run_time=now)

    def _on_held_change(self) -> None:
        """A job was held or released: the leader shows it in its status."""
        if self.is_leader and not self._stopping.is_set():
            self._publish_status(self.last_report)

    def _on_lease_lost(self, name: str) -> None:
        if name == GC_LEASE:
            log.warning("gc lease lost: stopping the round in progress, going to standby")
            self.metrics.leader.set(0)
            self._round_stop.set()

    def _note_future(
        self, document: str, field: str, times: list[tuple[str, datetime]], now: datetime
    ) -> None:
        """Log (once per writer) and count the stored times from the future
        among each writer's ``field`` of ``document``."""
        found = (
            find_future(document, writer, field, at, now, self._margin) for writer, at in times
        )
        self.future_log.note(f for f in found if f is not None)

    def _report_ages(self) -> dict[str, float]:
        """Each node's report age; a ``generated_at`` from the future is of
        unknown age and counts as stale (infinite: the stale-report alert
        fires beside the clock-skew one, instead of never)."""
        now = datetime.now(UTC)
        ages = {
            node: stored_age_seconds(at, now, self._margin)
            for node, at in self._report_times.items()
        }
        return {node: math.inf if age is None else age for node, age in ages.items()}

    def _pinning_sample(self) -> list[PinningSample]:
        current = self.collector.tracker.current
        if current is None:
            return []
        return [
            PinningSample(w.topic, w.partition, w.safe_epoch, w.node or "") for w in current.pinning
        ]

    # --- reporting -----------------------------------------------------------

    def _delay_after(self, report: RoundReport) -> timedelta:
        collected = report.collected
        epoch_started_at = None
        if collected is not None:
            epoch_started_at = self.collector.controller.epoch_started_at(
                collected.safe.controller_offset
            )
        return next_round_delay(
            report.outcome,
            self._settings.schedule,
            now=datetime.now(UTC),
            min_object_age=self._settings.collect.min_object_age,
            youngest_too_young=collected.youngest_too_young if collected else None,
            epoch_started_at=epoch_started_at,
            next_listing_at=collected.next_listing_at if collected else None,
        )

    def _observe(self, report: RoundReport, seconds: float) -> None:
        m = self.metrics
        m.rounds.labels(report.outcome.value).inc()
        m.set_state(report.state.value)
        collected = report.collected
        if collected is None:
            return
        s = collected.summary
        m.round_duration.observe(seconds)
        m.objects_listed.inc(s.listed)
        m.objects_deleted.inc(s.deleted)
        m.bytes_deleted.inc(s.bytes_deleted)
        m.delete_errors.inc(s.errors)
        m.request_cost.inc(s.cost_usd or 0.0)
        if s.shards is not None:
            m.shards_listed.inc(s.shards.listed)
        for reason, count in s.skipped.items():
            m.objects_skipped.labels(reason).inc(count)
        if report.outcome in (RoundOutcome.COLLECTED, RoundOutcome.IDLE) and (
            s.deleted >= s.eligible
        ):
            self._last_clean = time.time()
        if s.shards is None or s.shards.full_sweep:
            # Only a round that listed every shard saw everything outstanding.
            m.l0_objects_outstanding.set(max(0, s.listed - s.deleted))
            m.l0_bytes_outstanding.set(max(0, collected.bytes_listed - s.bytes_deleted))
        safe = collected.safe
        m.safe_epoch.set(safe.safe_epoch)
        m.cluster_epoch.set(safe.controller_offset)
        m.epoch_lag.set(safe.controller_offset - safe.safe_epoch)
        m.pinning_partitions.set(sum(1 for w in safe.pinning if w.safe_epoch == safe.safe_epoch))
        if report.outcome in (RoundOutcome.COLLECTED, RoundOutcome.IDLE):
            m.mark_success(s.finished_at)
        log.log(
            logging.DEBUG if report.outcome is RoundOutcome.IDLE else logging.INFO,
            "gc round %s: %s; M=%d (epoch %d), deleted %d of %d listed, %d errors, %.1fs",
            s.run_id,
            report.outcome.value,
            safe.safe_epoch,
            safe.controller_offset,
            s.deleted,
            s.listed,
            s.errors,
            seconds,
        )

    def _publish_status(self, report: RoundReport | None) -> None:
        collected = report.collected if report else None
        current = self.collector.tracker.current
        write_status(
            self._store,
            self._root,
            StatusDocument(
                state=self.collector.state,
                holder=self.leases.holder,
                updated_at=datetime.now(UTC),
                safe_epoch=current.safe_epoch if current else None,
                cluster_epoch=current.controller_offset if current else None,
                last_run_id=collected.summary.run_id if collected else None,
                last_outcome=report.outcome.value if report else None,
                last_success_at=self.collector.last_success_at,
                next_round_at=None if self._stopping.is_set() else self._next_round_at,
                last_round_at=report.finished_at if report else None,
                detail=(report.error or "") if report else self.collector.blocked_reason,
                held=self.pause_guard.held(),
            ),
        )
