"""How a reconciler node paces its duties (``NodeSettings``, from
``[reconciler]``) and what it counts (``NodeStats``, read by the metrics).

Apart from the node so that the supervisor (``node.py``), the leadership
(``leadership.py``) and the round's duties (``duties.py``) share them
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from epochgc.ownership.node_ownership import RoundReport
from epochgc.watermarks.partition.fence import FenceStats


@dataclass(frozen=True)
class NodeSettings:
    """How a node paces its duties.

    Attributes:
        idle_interval_seconds: an idle partition whose ``M(p)`` has not moved
            this long gets an ``advance_epoch`` (keeps idle partitions from
            pinning ``M``).
        report_interval_seconds: how often the node report is written.
        snapshot_every_entries: partition snapshot (and truncation) period.
        reconcile_concurrency: partitions reconciled at once.
        max_records_per_pass: records per L1 object.
        append_depth: appends in flight per partition.
        max_log_entries: a partition log longer than this is under space
            pressure and is truncated up to ``lro`` whatever the retention
            hint says (0: no cap).
        publish_reports: write the node report (off for one-shot commands).
    """

    idle_interval_seconds: float = 30.0
    report_interval_seconds: float = 10.0
    snapshot_every_entries: int = 1000
    reconcile_concurrency: int = 4
    max_records_per_pass: int = 100_000
    append_depth: int = 8
    max_log_entries: int = 0
    publish_reports: bool = True
    """Off for one-shot commands: their report would outlive them."""
    stuck_retry_seconds: float = 10.0
    """A stuck partition retries reading its missing or corrupt L0 object
    this often (it may come back, e.g. after a replication lag)."""
    ownership_interval_seconds: float = 0.0
    """Ownership rounds (LIST nodes and records, move partitions) run at
    most this often; 0: every round."""
    max_round_seconds: float = 0.0
    """In ``run``: a loop that completes no round for this long (plus its
    pause between rounds) stops the node; 0: four lease TTLs."""
    only_partitions: frozenset[tuple[str, int]] = frozenset()
    """(topic, partition) pairs this node shares out and leads, all others
    left to other nodes: a one-shot command's node (``epochgc produce
    orders 1`` needs partition 1 only). Empty: every partition of the
    live topics."""


@dataclass
class NodeStats:
    """Counters for metrics."""

    rounds: int = 0
    round_failures: int = 0
    """Rounds that ended early on an error (the round is retried next time)."""
    records_reconciled: int = 0
    bytes_reconciled: int = 0
    l1_objects: int = 0
    housekeeping_advances: int = 0
    reports_published: int = 0
    errors: int = 0
    leaderships: int = 0
    lost_leaderships: int = 0
    ownership_rounds: int = 0
    last_ownership: RoundReport = field(default_factory=RoundReport)
    last_round_seconds: float = 0.0
    led: list[str] = field(default_factory=list)
    retired_fence: FenceStats = field(default_factory=FenceStats)
    """Fence counters of partitions no longer led (so node totals only grow)."""
    retired_appends: int = 0
