"""Every setting a component takes, from the configuration: the one place
where ``Config`` becomes the ``*Settings`` and policies of the packages
below. Pure: no I/O (``default_node_id`` reads the host name).

Why one place: each component takes only the values it uses, typed, and is
tested without a configuration; the mapping from a TOML section to those
values was written in four modules and the ``[store]`` retry policy twice,
and they could drift.
"""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import TYPE_CHECKING

from epochgc.config import Config
from epochgc.gc.collection_round import (
    CollectSettings,
)
from epochgc.gc.collector import ScheduleSettings
from epochgc.gc.daemon.maintenance import MaintenanceSettings
from epochgc.gc.daemon.scheduler import DaemonSettings
from epochgc.gc.listing.cost import Prices
from epochgc.gc.listing.schedule import ListingPolicy
from epochgc.gc.spark.run_settings import SparkGcSettings
from epochgc.leases.timing import LeasePolicy
from epochgc.reconciler.node_settings import NodeSettings
from epochgc.storage.client import ClientSettings
from epochgc.storage.retry import RetryPolicy
from epochgc.watermarks.controller import CompactionPolicy

if TYPE_CHECKING:  # storage.inventory imports pyarrow: only inventory readers load it
    from epochgc.storage.inventory import InventoryLocation


def retry_policy_of(config: Config) -> RetryPolicy:
    """How S3 requests are retried, from ``[store]``: the driver's store and
    every Spark task's store retry alike."""
    return RetryPolicy(
        max_attempts=config.store.max_attempts,
        base_delay_seconds=config.store.base_backoff_seconds,
        max_delay_seconds=config.store.max_backoff_seconds,
    )


def client_settings_of(config: Config, endpoint_url: str | None = None) -> ClientSettings:
    """Client settings from the ``[store]`` section."""
    s = config.store
    return ClientSettings(
        endpoint_url=endpoint_url or s.endpoint_url or None,
        region=s.region,
        access_key_id=s.access_key_id or None,
        secret_access_key=s.secret_access_key or None,
        addressing_style=s.addressing_style,  # type: ignore[arg-type]
        connect_timeout_seconds=s.connect_timeout_seconds,
        read_timeout_seconds=s.read_timeout_seconds,
        max_pool_connections=s.max_pool_connections,
    )


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
        record_deletions=g.record_deletions,
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


def default_node_id() -> str:
    """The host name, in the node-id alphabet and at most 64 characters.

    Stable across restarts on purpose: the node id names the node's report,
    and an id that changed at every start (``hostname-pid``) left a report
    behind per restart that nothing deleted and the stale-reports alert
    fired on. Two reconcilers on one host need ``--node-id`` (or
    ``[reconciler] node_id``) each; lease holders stay unique per process
    anyway (a random suffix).
    """
    host = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname())
    host = host.strip(".") or "node"
    return host[:64]


def node_settings_of(
    config: Config,
    *,
    one_shot: bool = False,
    only_partitions: frozenset[tuple[str, int]] = frozenset(),
) -> NodeSettings:
    """``NodeSettings`` from the ``[reconciler]``, ``[reports]`` and
    ``[ownership]`` sections. A ``one_shot`` node (a command such as
    ``epochgc produce``) publishes no report, which would outlive it, and
    runs its ownership round in its first round: it does not join a
    cluster for long, so it does not wait for peers to register.
    ``only_partitions``: the (topic, partition) pairs it serves (empty: all)."""
    r = config.reconciler
    return NodeSettings(
        publish_reports=not one_shot,
        idle_interval_seconds=r.idle_interval_seconds,
        report_interval_seconds=config.reports.interval_seconds,
        snapshot_every_entries=r.snapshot_every_entries,
        reconcile_concurrency=r.reconcile_concurrency,
        max_records_per_pass=r.max_records_per_pass,
        append_depth=r.append_depth,
        max_log_entries=r.max_log_entries,
        stuck_retry_seconds=r.stuck_retry_seconds,
        ownership_interval_seconds=0.0 if one_shot else config.ownership.round_interval_seconds,
        max_round_seconds=r.max_round_seconds,
        only_partitions=only_partitions,
    )


def lease_policy_of(config: Config) -> LeasePolicy:
    """``LeasePolicy`` from the ``[lease]`` section."""
    return LeasePolicy(
        ttl_seconds=config.lease.ttl_seconds,
        renew_interval_seconds=config.lease.renew_interval_seconds,
        skew_margin_seconds=config.lease.skew_margin_seconds,
    )


def spark_gc_settings_of(config: Config) -> SparkGcSettings:
    """``SparkGcSettings`` from ``[layout]``, ``[store]``, ``[gc]``,
    ``[spark]``, ``[inventory]`` and ``[metrics]``."""
    g = config.gc
    return SparkGcSettings(
        root=config.layout.root,
        bucket=config.store.bucket,
        min_age=timedelta(seconds=g.min_object_age_seconds),
        retry=retry_policy_of(config),
        delete_concurrency=g.delete_concurrency,
        shard_concurrency=g.shard_concurrency,
        rate_limit_keys_per_second=g.rate_limit_keys_per_second,
        max_delete_fraction=g.max_delete_fraction,
        credentials=config.spark.credentials,
        inventory=inventory_location(config),
        pushgateway=config.metrics.pushgateway,
        record_deletions=g.record_deletions,
    )


def inventory_location(config: Config) -> InventoryLocation:
    """Where ``[inventory]`` says the reports are."""
    from epochgc.storage.inventory import InventoryLocation  # noqa: PLC0415 - needs pyarrow

    inv = config.inventory
    return InventoryLocation(
        bucket=inv.bucket or config.store.bucket,
        prefix=inv.prefix,
        source_bucket=inv.source_bucket or config.store.bucket,
        config_id=inv.config_id,
    )
