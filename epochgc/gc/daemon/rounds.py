"""The ``gc`` job: one collector round while this daemon holds the ``gc``
lease, turned into metrics and a log line; and the status document.

What a round does is the collector's (``gc.collector``), and so is when the
next one should come (``Collector.delay_after``); the daemon moves the
job's fire time. ``StatusPublisher`` writes ``{root}/gc/status.json`` (the
leader's view of itself) after each round and whenever the daemon's state
or the pause's holds change.

Invariants: every time is read from the clocks the daemon is given (the
wall clock for the documents and the sweep lag, the monotonic one for
durations); the round in progress is stopped through ``interrupt`` only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime

from epochgc.gc.collector import Collector, RoundOutcome, RoundReport
from epochgc.gc.control import StatusDocument, write_status
from epochgc.gc.daemon.contacts import StoreContacts
from epochgc.gc.pause import PauseGuard
from epochgc.metrics.instruments import GcMetrics
from epochgc.storage.object_store import ObjectStore

log = logging.getLogger(__name__)

SUCCESS = (RoundOutcome.COLLECTED, RoundOutcome.IDLE)
"""The outcomes of a round that finished without errors."""


@dataclass(eq=False)
class StatusPublisher:
    """Writes the status document from the collector, the lease holder,
    the pause and the latest round (one PUT; the leader's to call).

    Example::

        publish = StatusPublisher(store, root, collector, "gc-a/3f2a", guard, ...)
        publish(report, next_round_at)
    """

    store: ObjectStore
    root: str
    collector: Collector
    holder: str
    guard: PauseGuard
    _: KW_ONLY
    stopping: threading.Event
    now: Callable[[], datetime]

    def __call__(self, report: RoundReport | None, next_round_at: datetime | None) -> None:
        """Publish; ``report`` ``None``: no round to show (a clean stop).

        Raises:
            StorageError: the store failed.
        """
        collected = report.collected if report else None
        current = self.collector.tracker.current
        write_status(
            self.store,
            self.root,
            StatusDocument(
                state=self.collector.state,
                holder=self.holder,
                updated_at=self.now(),
                safe_epoch=current.safe_epoch if current else None,
                cluster_epoch=current.controller_offset if current else None,
                last_run_id=collected.summary.run_id if collected else None,
                last_outcome=report.outcome.value if report else None,
                last_success_at=self.collector.last_success_at,
                next_round_at=None if self.stopping.is_set() else next_round_at,
                last_round_at=report.finished_at if report else None,
                detail=(report.error or "") if report else self.collector.blocked_reason,
                held=self.guard.held(),
            ),
        )


@dataclass(eq=False)
class RoundJob:
    """The ``gc`` job: a round, if this daemon leads (see the module
    docstring). It returns the round's report; the daemon decides when the
    next one fires.

    Example::

        job = RoundJob(collector, metrics, contacts, is_leader, stopping, ...)
        report = job()      # None: not leading, or stopping
        job.interrupt()     # the round in progress stops after its batches in flight
    """

    collector: Collector
    metrics: GcMetrics
    contacts: StoreContacts
    is_leader: Callable[[], bool]
    stopping: threading.Event
    _: KW_ONLY
    now: Callable[[], datetime]
    monotonic: Callable[[], float]
    rounds: int = field(default=0, init=False)
    last_report: RoundReport | None = field(default=None, init=False)
    _round_stop: threading.Event = field(default_factory=threading.Event, init=False)
    _last_clean_at: datetime = field(init=False)

    def __post_init__(self) -> None:
        self._last_clean_at = self.now()

    def __call__(self) -> RoundReport | None:
        if self.stopping.is_set():
            return None
        if not self.is_leader():
            self.metrics.leader.set(0)
            return None
        self.metrics.leader.set(1)
        self._round_stop = threading.Event()
        if self.stopping.is_set():
            return None
        started = self.monotonic()
        report = self.collector.run_round(stop=self._round_stop)
        failed = report.outcome is RoundOutcome.FAILED
        self.contacts.record("round", (report.error or "the round failed") if failed else None)
        self.rounds += 1
        self.last_report = report
        observe_round(self.metrics, report, self.monotonic() - started)
        if left_nothing_eligible(report):
            self._last_clean_at = self.now()
        return report

    def interrupt(self) -> None:
        """Stop the round in progress after its batches in flight (a pause,
        a lost lease, a stop)."""
        self._round_stop.set()

    def sweep_lag_seconds(self) -> float:
        """Seconds since a round last left no eligible object undeleted
        (since this job was built, before any)."""
        return max(0.0, (self.now() - self._last_clean_at).total_seconds())


def left_nothing_eligible(report: RoundReport) -> bool:
    """The round succeeded and deleted every eligible object it listed."""
    collected = report.collected
    return (
        collected is not None
        and report.outcome in SUCCESS
        and collected.summary.deleted >= collected.summary.eligible
    )


def observe_round(metrics: GcMetrics, report: RoundReport, seconds: float) -> None:
    """Count ``report`` (a round of ``seconds``) in ``metrics`` and log it
    (DEBUG when idle, INFO otherwise)."""
    m = metrics
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
    if s.shards is None or s.shards.full_sweep:
        # Only a round that listed every shard saw everything outstanding.
        m.l0_objects_outstanding.set(max(0, s.listed - s.deleted))
        m.l0_bytes_outstanding.set(max(0, collected.bytes_listed - s.bytes_deleted))
    safe = collected.safe
    m.safe_epoch.set(safe.safe_epoch)
    m.cluster_epoch.set(safe.controller_offset)
    m.epoch_lag.set(safe.controller_offset - safe.safe_epoch)
    m.pinning_partitions.set(sum(1 for w in safe.pinning if w.safe_epoch == safe.safe_epoch))
    if report.outcome in SUCCESS:
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
