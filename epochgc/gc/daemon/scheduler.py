"""The GC daemon: APScheduler triggers wired to jobs, the ``gc`` lease and
the metrics endpoint. No GC logic lives here (that is ``collector``), and
no job but the lease's: each lives with its subsystem, built in ``parts``.

Jobs (all in one ``BackgroundScheduler``):

* ``gc`` (``rounds.RoundJob``): one collector round, interval ``[daemon]
  interval_seconds``, ``max_instances=1``, ``coalesce``,
  ``misfire_grace_time``. It runs only while this daemon holds the ``gc``
  lease (standby otherwise: several daemons may run, one collects). After
  each round the daemon moves its next fire time: soon after progress, at
  the next epoch tick or when the youngest too-young object ages in when
  idle (``Collector.delay_after``).
* ``lease`` (here): a standby daemon tries to take the ``gc`` lease; on
  success the ``gc`` job fires at once. The lease manager's heartbeat
  renews it.
* ``control`` (``control_poll.ControlPoll``): reads
  ``{root}/gc/control.json`` (pause / resume / reset); a pause stops a
  sweep in progress after its batches in flight. On resume, every job the
  pause held runs at once.
* The epoch ticker (``watermarks.ticker``, its own thread, not a job): with
  ``ticker`` on, this daemon competes for the cluster's one ``ticker``
  lease, independently of the ``gc`` lease, and ticks while it holds it.
* ``reports`` (``report_ages.ReportAges``): logs node reports older than
  ``report_stale_seconds`` and samples each node's report age for the
  metrics.
* ``presence`` (``presence_jobs.PresenceRefresh``): every
  ``presence_interval_seconds`` (and, through the ``lease`` job, soon after
  every change of role), writes this daemon's ``{root}/gc/daemons/{node_id}``
  (leader or standby), deleted on a clean stop.
* ``maintenance`` (``maintenance.MaintenanceJob``): while this daemon holds
  the lease, deletes the reports of gone nodes (when that costs ``M``
  nothing), expired run summaries and the presence documents of gone
  daemons.
* ``compact`` (``maintenance.CompactionJob``): while this daemon holds the
  lease, every ``[controller] compact_interval_seconds``, snapshots the
  controller log and deletes the entries the snapshot covers.

A job that raises a store error (``EpochGCError``) is retried at its next
run. One that raises anything else has met a defect: the daemon logs one
ERROR line naming the job and the error, sets ``done`` with ``failure``
saying why, and ``epochgc daemon`` stops and exits 1, so that the
supervisor restarts it instead of a daemon running on without rounds.

``stop()`` (SIGTERM in ``epochgc daemon``): state ``stopping``, the round in
progress finishes its DeleteObjects batches in flight and stops, the
scheduler shuts down, the ticker stops, the leases are released (a standby
takes over at once), state ``stopped``.

Clocks: every time the daemon writes, or compares with a stored one, is
read from the ``now`` it is given, every duration from its ``monotonic``.
The one exception is the scheduler's time: APScheduler reads the real clock
itself (3.x takes no clock), so the fire times handed to it, and the wait
until the next round (against the collector's times, on that clock too),
are read from ``scheduler_now``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor as JobThreadPool
from apscheduler.schedulers.background import BackgroundScheduler

from epochgc.errors import EpochGCError
from epochgc.events import EventChannel
from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import RoundReport, ScheduleSettings
from epochgc.gc.control import CollectorState, DeletingJob, HeldJob
from epochgc.gc.daemon.contacts import FAILED
from epochgc.gc.daemon.control_poll import CollectorStateChanged
from epochgc.gc.daemon.health import RENEWAL, HealthPolicy, HealthSample, health_payload
from epochgc.gc.daemon.maintenance import MaintenanceSettings
from epochgc.gc.daemon.parts import Clocks, DaemonHooks, build_jobs, build_parts
from epochgc.gc.pause import HeldJobsChanged
from epochgc.leases.role_leases import LeaseLost
from epochgc.leases.timing import LeasePolicy
from epochgc.metrics.instruments import CollectorRegistry
from epochgc.metrics.server import MetricsServer
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import CompactionPolicy, CompactionResult

log = logging.getLogger(__name__)

GC_LEASE = "gc"


def scheduler_now() -> datetime:
    """APScheduler's clock (the real one: it reads it itself)."""
    return datetime.now(UTC)


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
        now: the wall clock of every time the daemon writes or compares
            with a stored one.
        monotonic: the clock of durations (store contacts, rounds).
        events: the channel ``store`` publishes ``Throttled`` on (the
            rounds' sweepers slow down on it).
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
        monotonic: Callable[[], float] = time.monotonic,
        events: EventChannel | None = None,
    ) -> None:
        self._settings = settings
        self._clocks = Clocks(now, monotonic)
        self._stopping = threading.Event()
        self.done = threading.Event()
        """Set when the daemon should end: a stop was asked for (by whoever
        runs it) or a job met a defect (``failure`` says which)."""
        self.failure: str | None = None
        """Why a job's defect ended the daemon (``None``: none did)."""
        self._started = False
        self._next_round_at: datetime | None = None
        parts = build_parts(
            store,
            stats,
            root,
            settings,
            registry or CollectorRegistry(),
            self._clocks,
            events=events,
        )
        self.registry, self.metrics, self.collector = parts.registry, parts.metrics, parts.collector
        self.leases, self.ticker, self.pause_guard = parts.leases, parts.ticker, parts.pause_guard
        self.future_log, self._contacts = parts.future_log, parts.contacts
        self.jobs = build_jobs(
            parts,
            DaemonHooks(self._stopping, lambda: self.is_leader, self._describe),
        )
        parts.events.subscribe(HeldJobsChanged, self._on_held_change)
        parts.events.subscribe(CollectorStateChanged, self._on_state_change)
        parts.events.subscribe(LeaseLost, self._on_lease_lost)
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
        # A store the daemon cannot reach for a lease TTL makes /healthz answer 503.
        self._health_policy = HealthPolicy(
            unreachable_after_seconds=settings.lease.ttl_seconds,
            renewal_grace_seconds=settings.lease.renew_interval_seconds,
        )

    # --- state ---------------------------------------------------------------

    @property
    def node_id(self) -> str:
        return self._settings.node_id

    @property
    def metrics_url(self) -> str | None:
        return self._metrics_server.url if self._metrics_server is not None else None

    @property
    def is_leader(self) -> bool:
        return self.leases.grant(GC_LEASE) is not None

    @property
    def rounds(self) -> int:
        """Rounds run by this daemon."""
        return self.jobs.round.rounds

    @property
    def last_report(self) -> RoundReport | None:
        return self.jobs.round.last_report

    @property
    def last_compaction(self) -> CompactionResult | None:
        return self.jobs.compact.last_result

    def held_jobs(self) -> tuple[HeldJob, ...]:
        """The deleting jobs the pause holds now (empty while running)."""
        return self.pause_guard.held()

    def health(self) -> tuple[bool, dict[str, object]]:
        """For ``/healthz``: unhealthy (with the reasons, most important
        first) when stopped, ``safety_blocked``, the scheduler died, a kind
        of store contact has failed for a lease TTL, or the leader's lease
        renewals keep failing (``gc.daemon.health``)."""
        report, current = self.last_report, self.collector.tracker.current
        sample = HealthSample(
            state=self.collector.state.value,
            blocked_reason=self.collector.blocked_reason,
            scheduler_running=self._scheduler.running,
            leader=self.is_leader,
            contacts=self._contacts.snapshot(),
            holder=self.leases.holder,
            ticker=self.ticker is not None and self.ticker.held,
            safe_epoch=current.safe_epoch if current else None,
            last_outcome=report.outcome.value if report else None,
            last_success_at=self.collector.last_success_at,
            next_round_at=self._next_round_at,
        )
        return health_payload(sample, self._clocks.monotonic(), self._health_policy)

    # --- lifecycle -----------------------------------------------------------

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
        self.jobs.presence.started_at = self._clocks.now()
        self.jobs.control()
        self.leases.start()
        for job_id, job, seconds, options in self._triggers():
            self._scheduler.add_job(
                self._guarded(job_id, job), "interval", seconds=seconds, id=job_id, **options
            )
        self._scheduler.start()
        if self.ticker is not None:
            self.ticker.start()
        log.info(
            "gc daemon %s started (round interval %.0fs, metrics %s)",
            self.leases.holder,
            self._settings.schedule.interval.total_seconds(),
            self.metrics_url or "off",
        )

    def _triggers(self) -> list[tuple[str, Callable[[], object], float, dict[str, Any]]]:
        """Each job's id, callable, interval and APScheduler options."""
        s, j = self._settings, self.jobs
        at_once = {"next_run_time": scheduler_now()}
        grace = {"misfire_grace_time": max(1, int(s.misfire_grace_seconds))}
        return [
            ("lease", self._lease_job, s.lease.renew_interval_seconds, at_once),
            ("gc", self._gc_job, s.schedule.interval.total_seconds(), grace | at_once),
            ("control", j.control, s.control_poll_seconds, {}),
            ("reports", j.reports, s.reports_check_seconds, at_once),
            ("presence", j.presence, s.presence_interval_seconds, at_once),
            ("maintenance", j.maintenance, s.maintenance_interval_seconds, {}),
            ("compact", j.compact, s.compaction.interval_seconds, grace),
        ]

    def stop(self) -> None:
        """Finish the batch in flight, release the lease, stop. Idempotent."""
        if not self._started or self._stopping.is_set():
            return
        self._stopping.set()
        self.collector.begin_stopping()
        self.metrics.set_state(CollectorState.STOPPING.value)
        self.jobs.round.interrupt()
        started = self._clocks.monotonic()
        self._scheduler.shutdown(wait=True)
        was_leader = self.is_leader
        self.collector.mark_stopped()
        self.metrics.set_state(CollectorState.STOPPED.value)
        if was_leader:
            self._publish_status(None)
        if self.ticker is not None:
            self.ticker.stop(release=True)
        self.leases.stop(release=True)
        self.jobs.presence.delete_own()
        self.metrics.leader.set(0)
        if self._metrics_server is not None:
            self._metrics_server.stop()
        log.info("gc daemon stopped in %.1fs", self._clocks.monotonic() - started)

    def trigger_round(self) -> None:
        """Run the ``gc`` job as soon as possible (a lease was won, a pause
        lifted)."""
        self._fire_soon("gc", timedelta(0))

    # --- wiring --------------------------------------------------------------

    def _fire_soon(self, job_id: str, delay: timedelta) -> None:
        """Move ``job_id``'s next fire time to ``delay`` from now."""
        if self._stopping.is_set():
            return
        with contextlib.suppress(LookupError):  # the job is gone: shutting down
            self._scheduler.modify_job(job_id, next_run_time=scheduler_now() + delay)

    def _guarded(self, job_id: str, job: Callable[[], object]) -> Callable[[], None]:
        """``job``, ending the daemon when it raises anything but a store
        error (which the next run retries, as APScheduler logs it)."""

        def run() -> None:
            try:
                job()
            except EpochGCError:
                raise
            except Exception as err:
                self._fail(f"job {job_id} failed: {type(err).__name__}: {err}")

        return run

    def _fail(self, why: str) -> None:
        """A defect ends the daemon: one ERROR line (the traceback at
        DEBUG), ``failure`` for the process's exit, ``done`` to wake it.
        A job that fails while the daemon is stopping (its executor shut
        down under it) only warns: a clean stop stays a clean exit."""
        log.debug("gc daemon %s: %s", self.leases.holder, why, exc_info=True)
        if self._stopping.is_set():
            log.warning("gc daemon %s, stopping: %s", self.leases.holder, why)
            return
        if self.failure is None:
            self.failure = why
            log.error("gc daemon %s stopping: %s", self.leases.holder, why)
        self.done.set()

    def _gc_job(self) -> None:
        report = self.jobs.round()
        if report is None:
            return
        delay = self.collector.delay_after(report, self._settings.schedule, scheduler_now())
        self._next_round_at = self._clocks.now() + delay
        self._fire_soon("gc", delay)
        self._publish_status(report)

    def _lease_job(self) -> None:
        if self._stopping.is_set():
            return
        self.jobs.heartbeats()
        self.jobs.presence.refresh_if_role_changed()
        if self.is_leader:
            return
        grant = self._contacts.attempt(
            "lease", lambda: self.leases.try_acquire(GC_LEASE), "could not try the gc lease: %s"
        )
        if grant is not FAILED and grant is not None:
            self._contacts.record(RENEWAL)  # a fresh grant: earlier renewal failures are over
            log.info("gc daemon %s holds the gc lease (term %d)", self.leases.holder, grant.term)
            self.metrics.leader.set(1)
            self.trigger_round()

    def _on_state_change(self, change: CollectorStateChanged) -> None:
        """What the control document's change of the collector's state sets off."""
        before, after = change.before, change.after
        if after is CollectorState.PAUSED:
            self.jobs.round.interrupt()  # a sweep in progress stops after its batches in flight
        if before is CollectorState.PAUSED:
            self._run_held_jobs()
        if after is CollectorState.RUNNING:
            self.trigger_round()
        if self.is_leader:
            self._publish_status(self.last_report)

    def _run_held_jobs(self) -> None:
        """The pause is over: forget the holds and run the held jobs now
        (the round's janitor is still due and goes with the next round)."""
        held = {h.job for h in self.pause_guard.release_all()}
        for job_id, job in (
            ("compact", DeletingJob.CONTROLLER_TRUNCATION),
            ("maintenance", DeletingJob.TIDYING),
        ):
            if job in held:
                self._fire_soon(job_id, timedelta(0))

    def _on_held_change(self, _event: HeldJobsChanged) -> None:
        """A job was held or released: the leader shows it in its status."""
        if self.is_leader and not self._stopping.is_set():
            self._publish_status(self.last_report)

    def _on_lease_lost(self, lost: LeaseLost) -> None:
        if lost.name == GC_LEASE:
            log.warning("gc lease lost: stopping the round in progress, going to standby")
            self.metrics.leader.set(0)
            self.jobs.round.interrupt()

    def _publish_status(self, report: RoundReport | None) -> None:
        self.jobs.status(report, self._next_round_at)

    def _describe(self) -> tuple[str, str, str | None]:
        """This daemon's role, collector state and metrics URL (presence)."""
        role = "leader" if self.is_leader else "standby"
        return role, self.collector.state.value, self.metrics_url
