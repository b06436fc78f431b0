"""Custom collectors: metrics computed at scrape time from the components'
own counters, so the components never call ``gauge.set()`` and never
import ``prometheus_client``.

Components hand over a function returning a plain sample (``NodeSample``,
``ProducerSample``, the current ``PinningSample`` list); the collectors
turn it into metric families on every scrape. Nothing here has a label
whose values grow with the number of partitions: per-partition series
exist only for the K partitions that pin ``M`` (K is fixed), and node
figures are aggregated per node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


@dataclass(frozen=True)
class StuckSample:
    """A led partition that cannot be reconciled (``cause``: missing or
    corrupt L0 object)."""

    topic: str
    partition: int
    cause: str


@dataclass(frozen=True)
class NodeSample:
    """A reconciler node's figures (counters only grow)."""

    node_id: str
    led_partitions: int
    records_reconciled: int
    bytes_reconciled: int
    l1_objects: int
    housekeeping_advances: int
    reports_published: int
    errors: int
    leaderships: int
    lost_leaderships: int
    appends: int
    fence_same_epoch: int
    fence_new_epoch: int
    fence_rejected: int
    window_slides: int
    last_rejection_gap: int
    max_window_size: int
    lro_lag_sum: int
    lro_lag_max: int
    lease_acquisitions: int
    lease_losses: int
    lease_renew_failures: int
    stuck: tuple[StuckSample, ...] = ()
    partitions_owned: int = 0
    """Partitions its ownership records name (its current incarnation)."""
    ownership_moves: tuple[tuple[str, int], ...] = ()
    """(kind, total) of ownership moves: taken, taken_over, handed_back, lost."""
    node_lease_renew_seconds: float = 0.0
    """How long the last node lease renewal took."""
    """Only stuck partitions, so the series stay few."""


class NodeCollector(Collector):
    """Fencing, partition, reconciler and lease figures of the nodes of this
    process (one in production, two in the demo), labelled by node."""

    def __init__(self, samples: Callable[[], Sequence[NodeSample]]) -> None:
        self._samples = samples

    def collect(self) -> Iterator[Metric]:
        samples = list(self._samples())
        families: dict[str, Metric] = {}
        for s in samples:
            for family in self._families(s):
                merged = families.setdefault(family.name, family)
                if merged is not family:
                    merged.samples.extend(family.samples)
        yield from families.values()

    def _families(self, s: NodeSample) -> Iterator[Metric]:
        node = [s.node_id]

        def counter(name: str, text: str, value: int) -> CounterMetricFamily:
            family = CounterMetricFamily(name, text, labels=["node"])
            family.add_metric(node, value)
            return family

        def gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, text, labels=["node"])
            family.add_metric(node, value)
            return family

        def by_label(
            family: CounterMetricFamily | GaugeMetricFamily,
            values: Iterable[tuple[str, float]],
        ) -> Metric:
            """``family`` (labelled node and one more) with a sample per value."""
            for label, value in values:
                family.add_metric([s.node_id, label], value)
            return family

        yield by_label(
            CounterMetricFamily(
                "epochgc_fence_admissions",
                "Appends and housekeeping fenced by the epoch window, by result.",
                labels=["node", "result"],
            ),
            [
                ("same_epoch", s.fence_same_epoch),
                ("new_epoch", s.fence_new_epoch),
                ("rejected_stale", s.fence_rejected),
            ],
        )
        yield counter(
            "epochgc_fence_window_slides", "Times a window slid to a newer epoch.", s.window_slides
        )
        yield gauge(
            "epochgc_fence_last_rejection_gap_epochs",
            "Largest gap (window start - epoch) of the last stale rejection among led partitions.",
            s.last_rejection_gap,
        )
        yield gauge(
            "epochgc_partition_window_size_epochs",
            "Largest applied window (max - previous applied epoch) among led partitions.",
            s.max_window_size,
        )
        yield gauge("epochgc_partition_led", "Partitions this node leads.", s.led_partitions)
        yield by_label(
            GaugeMetricFamily(
                "epochgc_partition_lro_lag_records",
                "Records appended but not yet reconciled (log end - lro), over led partitions.",
                labels=["node", "aggregate"],
            ),
            [("sum", s.lro_lag_sum), ("max", s.lro_lag_max)],
        )
        stuck = GaugeMetricFamily(
            "epochgc_partition_stuck",
            "1 for each led partition whose reconciliation is stuck on a missing or corrupt "
            "L0 object (only stuck partitions are listed).",
            labels=["node", "topic", "partition", "cause"],
        )
        for item in s.stuck:
            stuck.add_metric([s.node_id, item.topic, str(item.partition), item.cause], 1)
        yield stuck
        yield counter(
            "epochgc_partition_appends", "Placeholder commands appended by leaders.", s.appends
        )
        yield counter(
            "epochgc_reconciler_records", "Records moved from L0 to L1.", s.records_reconciled
        )
        yield counter("epochgc_reconciler_bytes", "Record bytes written to L1.", s.bytes_reconciled)
        yield counter("epochgc_reconciler_l1_objects", "L1 objects written.", s.l1_objects)
        yield counter(
            "epochgc_reconciler_housekeeping_advances",
            "advance_epoch appends for idle partitions.",
            s.housekeeping_advances,
        )
        yield counter(
            "epochgc_reconciler_reports_published", "Node reports written.", s.reports_published
        )
        yield counter("epochgc_reconciler_errors", "Failed reconciler duties.", s.errors)
        yield counter(
            "epochgc_reconciler_leaderships", "Partitions this node started leading.", s.leaderships
        )
        yield counter(
            "epochgc_reconciler_lost_leaderships",
            "Partitions lost to an expired or taken lease.",
            s.lost_leaderships,
        )
        yield counter("epochgc_lease_acquisitions", "Leases acquired.", s.lease_acquisitions)
        yield counter("epochgc_lease_losses", "Leases lost.", s.lease_losses)
        yield counter(
            "epochgc_lease_renew_failures", "Lease renewals that failed.", s.lease_renew_failures
        )
        yield gauge(
            "epochgc_node_partitions_owned",
            "Partitions this node's ownership records name (balance: compare nodes).",
            s.partitions_owned,
        )
        yield by_label(
            CounterMetricFamily(
                "epochgc_node_ownership_moves",
                "Ownership moves of this node, by kind: taken (free), taken_over (from a node "
                "whose lease lapsed), handed_back (to the node that should own it), lost "
                "(taken from this node).",
                labels=["node", "kind"],
            ),
            s.ownership_moves,
        )
        yield gauge(
            "epochgc_node_lease_renew_seconds",
            "Duration of the last node lease renewal (one CAS).",
            s.node_lease_renew_seconds,
        )


@dataclass(frozen=True)
class ProducerSample:
    """A producer's figures."""

    l0_objects: int
    l0_bytes: int
    records_acked: int
    stale_epoch_retries: int
    orphaned_uploads: int
    replays: int


class ProducerCollector(Collector):
    """The reference producer's figures."""

    def __init__(self, sample: Callable[[], ProducerSample]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[Metric]:
        s = self._sample()
        for name, text, value in (
            ("epochgc_producer_l0_objects", "L0 objects uploaded.", s.l0_objects),
            ("epochgc_producer_l0_bytes", "L0 bytes uploaded.", s.l0_bytes),
            ("epochgc_producer_records_acked", "Records acknowledged.", s.records_acked),
            (
                "epochgc_producer_stale_epoch_retries",
                "Chunks re-uploaded after a stale-epoch rejection.",
                s.stale_epoch_retries,
            ),
            (
                "epochgc_producer_orphaned_uploads",
                "L0 objects uploaded but never referenced (left to GC).",
                s.orphaned_uploads,
            ),
            (
                "epochgc_producer_replays",
                "Chunks replayed to a new leader after a failover.",
                s.replays,
            ),
        ):
            yield CounterMetricFamily(name, text, value=value)


@dataclass(frozen=True)
class PinningSample:
    """One of the partitions with the lowest ``M(p)``."""

    topic: str
    partition: int
    safe_epoch: int
    node: str


class PinningCollector(Collector):
    """``M(p)`` of the K lowest partitions (K fixed by the caller's join),
    labelled by topic, partition and reporting node. Computed from the last
    join at scrape time, so a partition that stops pinning disappears at
    once instead of lingering as a stale series."""

    def __init__(self, sample: Callable[[], Sequence[PinningSample]]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "epochgc_collector_lowest_partition_safe_epoch",
            "M(p) of the partitions with the lowest watermarks (bounded: the K lowest).",
            labels=["topic", "partition", "node"],
        )
        for s in self._sample():
            family.add_metric([s.topic, str(s.partition), s.node], s.safe_epoch)
        yield family


@dataclass(frozen=True)
class TickerSample:
    """This process's part in the cluster's one epoch ticker."""

    eligible: bool
    """``[epoch] ticker`` is on: this process competes for the role."""
    held: bool
    ticks: int
    failures: int


class TickerCollector(Collector):
    """Whether this process holds the ticker role, and the ticks it appended.

    Summed over every process of a cluster, ``epochgc_ticker_leader`` should
    be 1 (0: the epoch and ``M`` stand still; 2 only briefly around a
    hand-over) and ``rate(epochgc_ticker_ticks_total)`` one per interval.
    """

    def __init__(self, sample: Callable[[], TickerSample]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[Metric]:
        s = self._sample()
        yield GaugeMetricFamily(
            "epochgc_ticker_eligible",
            "1 if this process may hold the cluster's epoch ticker role ([epoch] ticker).",
            value=1 if s.eligible else 0,
        )
        yield GaugeMetricFamily(
            "epochgc_ticker_leader",
            "1 while this process holds the epoch ticker role (lease 'ticker') and ticks.",
            value=1 if s.held else 0,
        )
        yield CounterMetricFamily(
            "epochgc_ticker_ticks",
            "epoch_tick entries this process appended to the controller log.",
            value=s.ticks,
        )
        yield CounterMetricFamily(
            "epochgc_ticker_tick_failures",
            "Ticks that failed (retried one interval later; the append may have landed).",
            value=s.failures,
        )


class ReportAgeCollector(Collector):
    """``epochgc_collector_report_age_seconds{node}``: how old each node's
    report was at this scrape, so a stale-report alert names its node.

    Bounded by the live nodes: the daemon samples the reports it last read,
    and the GC leader deletes the reports of gone nodes.

    Example::

        registry.register(ReportAgeCollector(lambda: {"node-1": 4.2}))
    """

    def __init__(self, sample: Callable[[], Mapping[str, float]]) -> None:
        self._sample = sample

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "epochgc_collector_report_age_seconds",
            "Age of each node's report (from its generated_at) as of the daemon's last read "
            "of the reports, counted up to this scrape.",
            labels=["node"],
        )
        for node, age in sorted(self._sample().items()):
            family.add_metric([node], max(0.0, age))
        yield family
