"""What the GC daemon is made of, built in one place: its collaborators
(``build_parts``) and its jobs (``build_jobs``), each job living with its
subsystem. ``scheduler.GcDaemon`` wires the jobs to triggers.

Every deleting job gets a store that asks the pause guard before each
delete request (``GuardedStore``); the raw store serves the daemon's own
documents. Every clock a part reads is the one the daemon is given.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from epochgc.events import EventChannel
from epochgc.gc.collector import Collector
from epochgc.gc.control import DeletingJob
from epochgc.gc.daemon.contacts import HeartbeatWatch, StoreContacts
from epochgc.gc.daemon.control_poll import ControlPoll
from epochgc.gc.daemon.maintenance import CompactionJob, LeaderMaintenance, MaintenanceJob
from epochgc.gc.daemon.presence_jobs import PresenceRefresh, PresenceTidy
from epochgc.gc.daemon.report_ages import ReportAges
from epochgc.gc.daemon.rounds import RoundJob, StatusPublisher
from epochgc.gc.future_times import FutureTimeFound, FutureTimeLog
from epochgc.gc.janitor import Janitor
from epochgc.gc.pause import GuardedStore, PauseGuard
from epochgc.leases.role_leases import LeaseManager
from epochgc.metrics.custom_collectors import PinningCollector, PinningSample
from epochgc.metrics.instruments import (
    CollectorRegistry,
    GcMetrics,
    TickerSample,
    register_report_ages,
    register_s3_requests,
    register_ticker,
)
from epochgc.runtime import Runtime
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.ticker import EpochTicker

if TYPE_CHECKING:  # the scheduler, which defines the settings, imports this module
    from epochgc.gc.daemon.scheduler import DaemonSettings


@dataclass(frozen=True)
class Clocks:
    """The daemon's clocks: ``now`` for every time it writes or compares
    with a stored one, ``monotonic`` for durations and intervals."""

    now: Callable[[], datetime]
    monotonic: Callable[[], float]


@dataclass(frozen=True)
class DaemonParts:
    """The daemon's collaborators (see ``build_parts``)."""

    store: ObjectStore
    root: str
    settings: DaemonSettings
    clocks: Clocks
    registry: CollectorRegistry
    metrics: GcMetrics
    contacts: StoreContacts
    pause_guard: PauseGuard
    future_log: FutureTimeLog
    collector: Collector
    leases: LeaseManager
    ticker: EpochTicker | None
    events: EventChannel
    """The daemon's channel: ``Throttled`` from the store, ``HeldJobsChanged``
    from the pause guard, ``FutureTimeFound`` from the time log,
    ``CollectorStateChanged`` from the control poll, ``LeaseLost`` from the
    leases."""

    def guarded(self, job: DeletingJob) -> GuardedStore:
        """The store ``job``'s deletions go through (a pause holds them)."""
        return GuardedStore(self.store, self.pause_guard, job)


def build_parts(
    store: ObjectStore,
    stats: RequestStats,
    root: str,
    settings: DaemonSettings,
    registry: CollectorRegistry,
    clocks: Clocks,
    *,
    events: EventChannel | None,
) -> DaemonParts:
    """The collaborators, their metrics registered on ``registry``;
    ``events`` is the channel ``store`` publishes ``Throttled`` on (a new
    one when ``None``), which the parts publish on too."""
    metrics = GcMetrics(registry)
    register_s3_requests(registry, stats)
    metrics.round_interval.set(settings.schedule.longest_wait.total_seconds())
    events = events if events is not None else EventChannel()
    events.subscribe(FutureTimeFound, lambda e: metrics.future_times.labels(e.document).inc())
    guard = PauseGuard(store, root, events=events)
    future_log = FutureTimeLog(events=events)
    collector = Collector(
        store,
        stats,
        root,
        settings.collect,
        blocked_after=settings.blocked_after_failures,
        janitor=Janitor(GuardedStore(store, guard, DeletingJob.JANITOR), root),
        janitor_interval_seconds=settings.maintenance_interval_seconds,
        monotonic=clocks.monotonic,
        guard=guard,
        writer=settings.node_id,
        future_log=future_log,
        events=events,
    )
    registry.register(PinningCollector(lambda: pinning_sample(collector)))
    leases = LeaseManager(
        store,
        root,
        settings.node_id,
        policy=settings.lease,
        events=events,
        runtime=Runtime(wall=clocks.now, monotonic=clocks.monotonic),
    )
    ticker = (
        EpochTicker(
            leases,
            collector.controller.tick,
            interval_seconds=settings.schedule.epoch_interval.total_seconds(),
            poll_seconds=settings.lease.renew_interval_seconds,
            monotonic=clocks.monotonic,
        )
        if settings.ticker
        else None
    )
    register_ticker(registry, lambda: ticker_sample(ticker))
    return DaemonParts(
        store,
        root,
        settings,
        clocks,
        registry,
        metrics,
        StoreContacts(clocks.monotonic),
        guard,
        future_log,
        collector,
        leases,
        ticker,
        events,
    )


@dataclass(frozen=True)
class DaemonHooks:
    """What the jobs need of the daemon that runs them."""

    stopping: threading.Event
    is_leader: Callable[[], bool]
    describe: Callable[[], tuple[str, str, str | None]]
    """This daemon's role, collector state and metrics URL, now."""


@dataclass(frozen=True)
class DaemonJobs:
    """One object per job; each is called by its trigger."""

    round: RoundJob
    status: StatusPublisher
    control: ControlPoll
    reports: ReportAges
    presence: PresenceRefresh
    maintenance: MaintenanceJob
    presence_tidy: PresenceTidy
    """Part of ``maintenance``."""
    compact: CompactionJob
    heartbeats: HeartbeatWatch


def build_jobs(parts: DaemonParts, hooks: DaemonHooks) -> DaemonJobs:
    """The jobs, the metrics that read them registered."""
    p, s, now = parts, parts.settings, parts.clocks.now
    margin = s.collect.clock_skew_margin_seconds
    tidy_store = p.guarded(DeletingJob.TIDYING)

    def leading() -> bool:
        return not hooks.stopping.is_set() and hooks.is_leader()

    round_job = RoundJob(
        p.collector,
        p.metrics,
        p.contacts,
        hooks.is_leader,
        hooks.stopping,
        now=now,
        monotonic=p.clocks.monotonic,
    )
    p.metrics.sweep_lag.set_function(round_job.sweep_lag_seconds)
    reports = ReportAges(
        p.store,
        p.root,
        s.report_stale_seconds,
        margin_seconds=margin,
        contacts=p.contacts,
        future_log=p.future_log,
        now=now,
    )
    register_report_ages(p.registry, reports.ages)
    tidy = PresenceTidy(
        p.store,
        tidy_store,
        p.root,
        s.node_id,
        s.maintenance.dead_after_seconds,
        margin_seconds=margin,
        future_log=p.future_log,
        metrics=p.metrics,
        now=now,
    )
    maintenance = LeaderMaintenance(
        tidy_store,
        p.root,
        s.maintenance,
        monotonic=p.clocks.monotonic,
        now=now,
        future_log=p.future_log,
    )
    # Its own controller: it keeps the configured epoch history, which the
    # snapshots it writes carry.
    compactor = Controller(
        p.guarded(DeletingJob.CONTROLLER_TRUNCATION),
        p.root,
        epoch_history=s.compaction.epoch_history,
        runtime=Runtime(wall=now),
    )
    return DaemonJobs(
        round=round_job,
        status=StatusPublisher(
            p.store,
            p.root,
            p.collector,
            p.leases.holder,
            p.pause_guard,
            stopping=hooks.stopping,
            now=now,
        ),
        control=ControlPoll(p.store, p.root, p.collector, p.metrics, p.contacts, p.events),
        reports=reports,
        presence=PresenceRefresh(
            p.store,
            p.root,
            s.node_id,
            p.leases.holder,
            s.presence_interval_seconds,
            hooks.describe,
            contacts=p.contacts,
            stopping=hooks.stopping,
            now=now,
        ),
        maintenance=MaintenanceJob(
            maintenance, p.pause_guard, p.collector.controller, p.metrics, tidy, leading
        ),
        presence_tidy=tidy,
        compact=CompactionJob(
            compactor, p.pause_guard, min_entries=s.compaction.min_entries, leading=leading
        ),
        heartbeats=HeartbeatWatch(p.leases, p.ticker, p.contacts),
    )


def pinning_sample(collector: Collector) -> list[PinningSample]:
    """The partitions pinning ``M`` at the collector's last computation."""
    current = collector.tracker.current
    if current is None:
        return []
    return [
        PinningSample(w.topic, w.partition, w.safe_epoch, w.node or "") for w in current.pinning
    ]


def ticker_sample(ticker: EpochTicker | None) -> TickerSample:
    """The ticker's figures (not eligible: ``ticker`` off)."""
    if ticker is None:
        return TickerSample(eligible=False, held=False, ticks=0, failures=0)
    return TickerSample(
        eligible=True, held=ticker.held, ticks=ticker.ticks, failures=ticker.failures
    )
