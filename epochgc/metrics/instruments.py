"""Every metric of the collector, defined in one place (docs/operating.md,
"Watching it").

Names follow ``epochgc_<subsystem>_<name>_<unit>``; counters end in
``_total``. Labels are bounded enums (round outcome, skip reason, collector
state, S3 operation and status). Object keys and epoch numbers never go
into labels.

``GcMetrics(registry)`` registers on the registry it is given, so each test
and each process builds its own; components receive it as a parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from epochgc.metrics.custom_collectors import (
    NodeCollector,
    NodeSample,
    ProducerCollector,
    ProducerSample,
    ReportAgeCollector,
    TickerCollector,
    TickerSample,
)
from epochgc.storage.request_stats import RequestStats

__all__ = [
    "CollectorRegistry",
    "GcMetrics",
    "HealthCheck",
    "ProducerMetrics",
    "ReconcilerMetrics",
    "S3RequestCollector",
    "TickerSample",
    "register_report_ages",
    "register_s3_requests",
    "register_ticker",
]

ROUND_OUTCOMES = ("collected", "idle", "paused", "safety_blocked", "guard_stopped", "failed")
SKIP_REASONS = ("too_young", "above_safe_epoch", "unparseable", "outside_root")
COLLECTOR_STATES = ("running", "paused", "safety_blocked", "stopping", "stopped")
FUTURE_TIME_DOCUMENTS = ("shard_knowledge", "report", "presence", "run")
"""Documents whose stored times a collector compares with its own clock."""


class GcMetrics:
    """The collector daemon's metrics.

    Example::

        registry = CollectorRegistry()
        metrics = GcMetrics(registry)
        metrics.safe_epoch.set(80)
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.safe_epoch = Gauge(
            "epochgc_collector_safe_epoch",
            "The global safe epoch M the collector last used: every L0 object "
            "with epoch <= M may be deleted.",
            registry=registry,
        )
        self.cluster_epoch = Gauge(
            "epochgc_collector_cluster_epoch",
            "The cluster epoch (controller log offset) at the last round.",
            registry=registry,
        )
        self.epoch_lag = Gauge(
            "epochgc_collector_epoch_lag",
            "Cluster epoch minus M: how many epochs of L0 objects are still pinned.",
            registry=registry,
        )
        self.rounds = Counter(
            "epochgc_collector_rounds_total",
            "Collector rounds by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.maintenance_deleted = Counter(
            "epochgc_collector_maintenance_deleted_total",
            "Objects the GC leader's maintenance deleted, by kind: report (of a gone "
            "node, covered by live ones), run (summary past the retention), presence (of a "
            "daemon gone for good).",
            ["kind"],
            registry=registry,
        )
        self.objects_listed = Counter(
            "epochgc_collector_objects_listed_total",
            "L0 objects listed by the sweeper.",
            registry=registry,
        )
        self.objects_deleted = Counter(
            "epochgc_collector_objects_deleted_total",
            "L0 objects deleted.",
            registry=registry,
        )
        self.objects_skipped = Counter(
            "epochgc_collector_objects_skipped_total",
            "Listed L0 objects not deleted, by reason.",
            ["reason"],
            registry=registry,
        )
        self.bytes_deleted = Counter(
            "epochgc_collector_bytes_deleted_total",
            "Bytes of L0 objects deleted.",
            registry=registry,
        )
        self.delete_errors = Counter(
            "epochgc_collector_delete_errors_total",
            "Keys whose deletion (or shards whose listing) failed after retries.",
            registry=registry,
        )
        self.request_cost = Counter(
            "epochgc_collector_request_cost_dollars_total",
            "Modelled dollars of the collector rounds' S3 requests at the [cost] prices.",
            registry=registry,
        )
        self.shards_listed = Counter(
            "epochgc_collector_shards_listed_total",
            "L0 shards listed by collector rounds (the cost-aware schedule lists only "
            "those worth listing).",
            registry=registry,
        )
        self.round_duration = Histogram(
            "epochgc_collector_round_duration_seconds",
            "Duration of collector rounds that ran a sweep.",
            buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
            registry=registry,
        )
        self.last_success = Gauge(
            "epochgc_collector_last_success_timestamp_seconds",
            "Unix time of the last round that finished without errors.",
            registry=registry,
        )
        self.state = Gauge(
            "epochgc_collector_state",
            "1 for the collector's current state, 0 for the others.",
            ["state"],
            registry=registry,
        )
        self.leader = Gauge(
            "epochgc_collector_leader",
            "1 while this daemon holds the GC lease (runs rounds), 0 in standby.",
            registry=registry,
        )
        self.round_interval = Gauge(
            "epochgc_collector_round_interval_seconds",
            "The configured longest wait between rounds (alerts compare against it).",
            registry=registry,
        )
        self.sweep_lag = Gauge(
            "epochgc_collector_sweep_lag_seconds",
            "Seconds since a round last left no eligible object undeleted (0 right after a "
            "clean round): how far deletion trails M.",
            registry=registry,
        )
        self.l0_objects_outstanding = Gauge(
            "epochgc_l0_objects_outstanding",
            "L0 objects left after the last round (exact with the delete-fraction guard on, "
            "which lists shards to their end; otherwise those at or below M plus the first "
            "above it per shard).",
            registry=registry,
        )
        self.l0_bytes_outstanding = Gauge(
            "epochgc_l0_bytes_outstanding",
            "Bytes of the L0 objects counted by epochgc_l0_objects_outstanding.",
            registry=registry,
        )
        self.pinning_partitions = Gauge(
            "epochgc_collector_pinning_partitions",
            "Live partitions whose M(p) equals M (they hold M back).",
            registry=registry,
        )
        self.future_times = Counter(
            "epochgc_collector_future_stored_times_total",
            "Documents read holding a time ahead of this daemon's clock by more than "
            "gc.clock_skew_margin_seconds, by kind; such a time is read as unknown (work is "
            "done as if it never happened). Some host's clock is wrong.",
            ["document"],
            registry=registry,
        )
        for document in FUTURE_TIME_DOCUMENTS:
            self.future_times.labels(document)
        for outcome in ROUND_OUTCOMES:
            self.rounds.labels(outcome)
        for reason in SKIP_REASONS:
            self.objects_skipped.labels(reason)
        self.set_state("running")

    def set_state(self, state: str) -> None:
        """Make ``state`` the one state gauge at 1."""
        for name in COLLECTOR_STATES:
            self.state.labels(name).set(1 if name == state else 0)

    def mark_success(self, at: datetime) -> None:
        self.last_success.set(at.timestamp())


class S3RequestCollector(Collector):
    """``epochgc_s3_requests_total{operation, status}`` read from
    ``RequestStats`` at scrape time (nothing is pushed ahead of time)."""

    def __init__(self, stats: RequestStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "epochgc_s3_requests",
            "S3 HTTP requests (every attempt) by operation and status.",
            labels=["operation", "status"],
        )
        slowdowns = 0
        for (operation, status), count in sorted(self._stats.by_outcome().items()):
            family.add_metric([operation, status], count)
            if status == "503":
                slowdowns += count
        yield family
        yield CounterMetricFamily(
            "epochgc_s3_slowdowns",
            "S3 answers 503 (SlowDown): each lowers the delete rate.",
            value=slowdowns,
        )


def register_s3_requests(registry: CollectorRegistry, stats: RequestStats) -> None:
    """Expose ``stats`` on ``registry``."""
    registry.register(S3RequestCollector(stats))


def register_ticker(registry: CollectorRegistry, sample: Callable[[], TickerSample]) -> None:
    """Expose this process's part in the epoch ticker (read at scrape time).

    Example::

        register_ticker(registry, lambda: TickerSample(True, ticker.held, ticker.ticks, 0))
    """
    registry.register(TickerCollector(sample))


def register_report_ages(
    registry: CollectorRegistry, sample: Callable[[], Mapping[str, float]]
) -> None:
    """Expose each node's report age (``{node: seconds}``, read at scrape
    time) as ``epochgc_collector_report_age_seconds{node}``."""
    registry.register(ReportAgeCollector(sample))


class ReconcilerMetrics:
    """A reconciler node's metrics: the round-duration histogram here, every
    other figure from a ``NodeCollector`` at scrape time."""

    def __init__(
        self, registry: CollectorRegistry, samples: Callable[[], Sequence[NodeSample]]
    ) -> None:
        self.registry = registry
        self.round_duration = Histogram(
            "epochgc_reconciler_round_duration_seconds",
            "Duration of reconciler node rounds (lead, reconcile, housekeep, report).",
            ["node"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=registry,
        )
        registry.register(NodeCollector(samples))


class ProducerMetrics:
    """The reference producer's metrics: produce latency observed per call,
    counters from a ``ProducerCollector``."""

    def __init__(self, registry: CollectorRegistry, sample: Callable[[], ProducerSample]) -> None:
        self.latency = Histogram(
            "epochgc_producer_latency_seconds",
            "From produce() to acknowledgement (records durable in the partition log).",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        registry.register(ProducerCollector(sample))


HealthCheck = Callable[[], tuple[bool, dict[str, object]]]
"""Returns (healthy, details) for ``/healthz``."""
