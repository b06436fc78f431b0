"""Composition root of the collector: settings from the configuration, and
running the daemon as a process (``epochgc daemon``) until SIGTERM."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import timedelta

from epochgc.config import Config
from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import ScheduleSettings
from epochgc.gc.cost import Prices
from epochgc.gc.daemon.maintenance import MaintenanceSettings
from epochgc.gc.daemon.scheduler import DaemonSettings, GcDaemon
from epochgc.gc.listing.schedule import ListingPolicy
from epochgc.metrics.instruments import CollectorRegistry
from epochgc.reconciler.process import default_node_id, lease_policy_of
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import CompactionPolicy

log = logging.getLogger("epochgc.gc.service")


def prices_of(config: Config) -> Prices:
    """``Prices`` from ``[cost]``."""
    c = config.cost
    return Prices(
        list_per_1000=c.list_price_per_1000,
        delete_per_1000=c.delete_price_per_1000,
        get_per_1000=c.get_price_per_1000,
        storage_per_gb_month=c.storage_price_per_gb_month,
    )


def collect_settings_of(config: Config) -> CollectSettings:
    """``CollectSettings`` from ``[gc]`` and ``[cost]``: a round lists the
    shards present in the bucket (not ``layout.l0_shards``) that the
    cost-aware schedule picks."""
    g = config.gc
    prices = prices_of(config)
    return CollectSettings(
        min_object_age=timedelta(seconds=g.min_object_age_seconds),
        max_delete_fraction=g.max_delete_fraction,
        shard_concurrency=g.shard_concurrency,
        delete_concurrency=g.delete_concurrency,
        rate_limit_keys_per_second=g.rate_limit_keys_per_second or None,
        listing=ListingPolicy(
            max_lag_seconds=g.max_lag_seconds,
            full_sweep_interval_seconds=g.full_sweep_interval_seconds,
            prices=prices,
        ),
        prices=prices,
        clock_skew_margin_seconds=g.clock_skew_margin_seconds,
    )


def daemon_settings_of(
    config: Config, *, node_id: str | None = None, metrics_listen: str | None = None
) -> DaemonSettings:
    """``DaemonSettings`` from ``[daemon]``, ``[gc]``, ``[epoch]`` (interval
    and ticker), ``[lease]``, ``[reports]``, ``[metrics]`` and ``[controller]``."""
    d = config.daemon
    return DaemonSettings(
        node_id=node_id or d.node_id or f"gc-{default_node_id()}"[:64],
        collect=collect_settings_of(config),
        schedule=ScheduleSettings(
            interval=timedelta(seconds=d.interval_seconds),
            after_progress=timedelta(seconds=d.after_progress_seconds),
            after_failure=timedelta(seconds=d.after_failure_seconds),
            epoch_interval=timedelta(seconds=config.epoch.interval_seconds),
            # Rounds with no shard due are bookkeeping: a dozen per lag period.
            scheduled_idle=timedelta(
                seconds=max(d.interval_seconds, config.gc.max_lag_seconds / 12)
            ),
        ),
        lease=lease_policy_of(config),
        misfire_grace_seconds=d.misfire_grace_seconds,
        control_poll_seconds=d.control_poll_seconds,
        ticker=config.epoch.ticker,
        reports_check_seconds=max(1.0, config.reports.interval_seconds),
        report_stale_seconds=d.report_stale_seconds,
        blocked_after_failures=d.blocked_after_failures,
        metrics_listen=config.metrics.listen if metrics_listen is None else metrics_listen,
        maintenance=MaintenanceSettings(
            dead_after_seconds=config.reports.dead_after_seconds,
            runs_retention=timedelta(days=config.gc.runs_retention_days),
            clock_skew_margin_seconds=config.gc.clock_skew_margin_seconds,
        ),
        maintenance_interval_seconds=config.gc.maintenance_interval_seconds,
        compaction=compaction_policy_of(config),
        presence_interval_seconds=d.presence_interval_seconds,
    )


def compaction_policy_of(config: Config) -> CompactionPolicy:
    """``CompactionPolicy`` from ``[controller]``."""
    c = config.controller
    return CompactionPolicy(
        interval_seconds=c.compact_interval_seconds,
        min_entries=c.compact_min_entries,
        epoch_history=c.epoch_history,
    )


def run_daemon(
    config: Config,
    store: ObjectStore,
    stats: RequestStats,
    *,
    node_id: str | None = None,
    duration_seconds: float | None = None,
    registry: CollectorRegistry | None = None,
) -> GcDaemon:
    """Run the daemon until SIGTERM/SIGINT (or ``duration_seconds``), then
    stop it cleanly: the batch in flight finishes, the lease is released.
    Must be called from the main thread (signal handlers)."""
    daemon = GcDaemon(
        store,
        stats,
        config.layout.root,
        daemon_settings_of(config, node_id=node_id),
        registry=registry,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        daemon.start()
        stop.wait(duration_seconds)
    finally:
        daemon.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return daemon
