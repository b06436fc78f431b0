"""The collector as a long-lived thing: its state (running, paused,
safety_blocked, stopping, stopped), one round at a time, and when the next
round should come.

The collector keeps the shard knowledge (``gc.listing.knowledge``) in memory
between rounds: it reads ``{root}/gc/shards/state`` once, at its first
round, and each round hands back the knowledge updated by its listings.

``Collector.run_round`` is what the daemon's GC job calls; it returns a
``RoundReport`` and the daemon turns that into logs, metrics, the status
document and the next fire time. The collector holds no lease and no
scheduler: the daemon decides *whether* to run, the collector *what* a
round does. ``next_round_delay`` is pure (it takes ``now``).

``safety_blocked`` is sticky: after ``blocked_after`` untrusted
computations in a row (stored content that does not parse or has an
unknown ``v``), no round deletes anything until an operator has looked and
run ``gc reset`` (or restarted the daemon). An input that only *lowers*
``M`` is not untrusted; the tracker ignores it (``M`` is kept). A store
error, transient (SlowDown, 5xx, a refused connection) or permanent (a
missing bucket, denied access, bad credentials), only fails the round: it
says nothing about the content, and the next round retries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

from epochgc.errors import CollectorPausedError, EpochGCError, SafetyBlockedError
from epochgc.events import EventChannel
from epochgc.gc.collection_round import CollectOutcome, CollectSettings, collect_once
from epochgc.gc.control import CollectorState, ControlDocument, DeletingJob
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.janitor import Janitor
from epochgc.gc.listing.knowledge import ShardKnowledge
from epochgc.gc.pause import PauseGuard
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import SafeEpochTracker

log = logging.getLogger(__name__)


class RoundOutcome(Enum):
    """How a round ended (a bounded metric label)."""

    COLLECTED = "collected"
    """Something was deleted."""
    IDLE = "idle"
    """Nothing eligible."""
    PAUSED = "paused"
    BLOCKED = "safety_blocked"
    GUARD_STOPPED = "guard_stopped"
    """``max_delete_fraction`` stopped the round; nothing deleted."""
    FAILED = "failed"
    """An error (listing, deleting, writing the summary)."""


@dataclass(frozen=True)
class ScheduleSettings:
    """When rounds run.

    Attributes:
        interval: the longest wait between rounds.
        after_progress: the wait after a round that deleted something (more
            may have become eligible meanwhile: keep going soon).
        after_failure: the wait after a failed round.
        epoch_interval: the epoch ticker's period; ``M`` cannot move before
            the next tick, so an idle round waits for it.
        scheduled_idle: with the cost-aware schedule, the longest wait
            after a round when no shard is due sooner: ``M``, the metrics
            and the status stay this fresh (``None``: ``interval``).
    """

    interval: timedelta = timedelta(seconds=60)
    after_progress: timedelta = timedelta(seconds=1)
    after_failure: timedelta = timedelta(seconds=10)
    epoch_interval: timedelta = timedelta(seconds=60)
    scheduled_idle: timedelta | None = None

    @property
    def longest_wait(self) -> timedelta:
        """The longest wait between two rounds that ran."""
        return max(self.interval, self.scheduled_idle or self.interval)


def next_round_delay(
    outcome: RoundOutcome,
    settings: ScheduleSettings,
    *,
    now: datetime,
    min_object_age: timedelta,
    youngest_too_young: datetime | None,
    epoch_started_at: datetime | None,
    next_listing_at: datetime | None = None,
) -> timedelta:
    """How long to wait before the next round. Pure.

    After progress: soon. After a failure: a short back-off. Idle: until the
    next epoch tick is due (``M`` may move then) or the youngest too-young
    object ages in, whichever comes first, never longer than the interval.
    Paused or blocked: the interval (control changes are polled apart).

    With the cost-aware schedule (``next_listing_at`` given), a round lists
    only the shards that are due, so the next round comes when the next
    shard is due, or after ``scheduled_idle`` (idle rounds keep ``M`` and
    the metrics fresh and cost a few requests each), whichever is first; a
    round that deleted something is not followed at once (the shards it
    listed are not due again soon).
    """
    if next_listing_at is not None and outcome in (RoundOutcome.COLLECTED, RoundOutcome.IDLE):
        return max(min(next_listing_at - now, settings.longest_wait), timedelta(seconds=0.5))
    if outcome is RoundOutcome.COLLECTED:
        return min(settings.after_progress, settings.interval)
    if outcome is RoundOutcome.FAILED:
        return min(settings.after_failure, settings.interval)
    if outcome is not RoundOutcome.IDLE:
        return settings.interval
    waits = [settings.interval]
    if epoch_started_at is not None:
        waits.append(epoch_started_at + settings.epoch_interval - now)
    if youngest_too_young is not None:
        waits.append(youngest_too_young + min_object_age - now)
    # A small floor: a tick that is already due should not make us spin.
    return max(min(waits), timedelta(seconds=0.5))


@dataclass(frozen=True)
class RoundReport:
    """One round, as data."""

    outcome: RoundOutcome
    state: CollectorState
    collected: CollectOutcome | None = None
    error: str | None = None
    finished_at: datetime | None = None


class Collector:
    """The collector's state and its rounds.

    Example::

        collector = Collector(store, stats, "epochgc", settings)
        collector.apply_control(read_control(store, "epochgc")[0])
        report = collector.run_round(stop=threading.Event())

    Args:
        blocked_after: untrusted ``M`` computations in a row that make the
            collector ``safety_blocked``.
        writer: this collector's name in the shard knowledge it writes.
        future_log: where stored times from the future are logged and
            counted (one per collector: each writer is logged once).
        events: the channel ``store`` publishes ``Throttled`` on (each
            round's sweeper slows down on it: ``collect_once``).
        now: the clock a round's run id and object ages are read from
            (``None``: the process's clock). The daemon does not pass the
            clock it was given: a simulated host days behind would find
            every object too young and delete nothing (docs/internals.md).
    """

    def __init__(
        self,
        store: ObjectStore,
        stats: RequestStats,
        root: str,
        settings: CollectSettings,
        *,
        blocked_after: int = 3,
        janitor: Janitor | None = None,
        janitor_interval_seconds: float = 300.0,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] | None = None,
        guard: PauseGuard | None = None,
        writer: str = "",
        future_log: FutureTimeLog | None = None,
        events: EventChannel | None = None,
    ) -> None:
        self._now = now
        self._events = events
        self.guard = guard or PauseGuard(store, root)
        """Decides whether a round may delete, and remembers what a pause held."""
        self._writer = writer
        self._future_log = future_log or FutureTimeLog()
        self.knowledge: ShardKnowledge | None = None
        """The shard knowledge after the last round (``None``: not read yet)."""
        self._janitor = janitor
        self._janitor_interval = janitor_interval_seconds
        self._monotonic = monotonic
        self._janitor_ran_at: float | None = None
        self._store = store
        self._stats = stats
        self._root = root
        self._settings = settings
        self.tracker = SafeEpochTracker(blocked_after=blocked_after)
        self.controller = Controller(store, root)
        self._lock = threading.Lock()
        self._state = CollectorState.RUNNING
        self._blocked_reason = ""
        self._reset_generation: int | None = None
        self.last_success_at: datetime | None = None

    @property
    def state(self) -> CollectorState:
        with self._lock:
            return self._state

    @property
    def blocked_reason(self) -> str:
        with self._lock:
            return self._blocked_reason

    def apply_control(self, control: ControlDocument) -> None:
        """Follow the operators' control document: pause/resume, and a
        reset request (a grown ``reset_generation``) clears
        ``safety_blocked``. The first document seen only sets the baseline:
        an old reset must not unblock a new block."""
        with self._lock:
            if self._state in (CollectorState.STOPPING, CollectorState.STOPPED):
                return
            if self._reset_generation is None:
                self._reset_generation = control.reset_generation
            elif control.reset_generation > self._reset_generation:
                self._reset_generation = control.reset_generation
                if self._state is CollectorState.SAFETY_BLOCKED or self.tracker.is_blocked:
                    log.warning("gc reset by %s: leaving safety_blocked", control.updated_by)
                self.tracker.reset_failures()
                self._blocked_reason = ""
                self._state = CollectorState.RUNNING
            if self._state is CollectorState.SAFETY_BLOCKED:
                return
            wanted = CollectorState.PAUSED if control.paused else CollectorState.RUNNING
            if wanted is not self._state:
                log.warning(
                    "collector %s by %s%s",
                    "paused" if control.paused else "resumed",
                    control.updated_by or "an operator",
                    f": {control.reason}" if control.reason else "",
                )
            self._state = wanted

    def delay_after(
        self, report: RoundReport, schedule: ScheduleSettings, now: datetime
    ) -> timedelta:
        """``next_round_delay`` after ``report``, with what its round saw
        (the controller knows when that round's epoch began)."""
        collected = report.collected
        epoch_started_at = None
        if collected is not None:
            epoch_started_at = self.controller.epoch_started_at(collected.safe.controller_offset)
        return next_round_delay(
            report.outcome,
            schedule,
            now=now,
            min_object_age=self._settings.min_object_age,
            youngest_too_young=collected.youngest_too_young if collected else None,
            epoch_started_at=epoch_started_at,
            next_listing_at=collected.next_listing_at if collected else None,
        )

    def begin_stopping(self) -> None:
        with self._lock:
            self._state = CollectorState.STOPPING

    def mark_stopped(self) -> None:
        with self._lock:
            self._state = CollectorState.STOPPED

    def run_round(self, *, stop: threading.Event | None = None) -> RoundReport:
        """One round, unless paused, blocked or stopping. Never raises for
        store trouble: a failed round is a report, the next one retries."""
        state = self.state
        started = self._monotonic()
        due = self._janitor is not None and (
            self._janitor_ran_at is None or started - self._janitor_ran_at >= self._janitor_interval
        )
        if state is not CollectorState.RUNNING:
            if state is CollectorState.PAUSED:
                self.guard.hold(DeletingJob.L0)
                if due:
                    self.guard.hold(DeletingJob.JANITOR)
                return RoundReport(RoundOutcome.PAUSED, state, finished_at=datetime.now(UTC))
            # Blocked: every round's report keeps naming the cause.
            return RoundReport(
                RoundOutcome.BLOCKED,
                state,
                error=self.blocked_reason or None,
                finished_at=datetime.now(UTC),
            )
        try:
            collected = collect_once(
                self._store,
                self._stats,
                self._root,
                self._settings,
                tracker=self.tracker,
                stop=stop,
                controller=self.controller,
                janitor=self._janitor if due else None,
                knowledge=self.knowledge,
                now=self._now() if self._now is not None else None,
                guard=self.guard,
                writer=self._writer,
                future_log=self._future_log,
                events=self._events,
            )
        except SafetyBlockedError:
            return self._untrusted(self.tracker.last_error)
        except CollectorPausedError as err:
            # Paused after the last control poll: the round itself refused.
            log.info("gc round not run: %s", err)
            return RoundReport(
                RoundOutcome.PAUSED, self.state, error=str(err), finished_at=datetime.now(UTC)
            )
        except EpochGCError as err:
            log.warning("gc round failed: %s", err)
            return RoundReport(
                RoundOutcome.FAILED, self.state, error=str(err), finished_at=datetime.now(UTC)
            )
        if collected.knowledge is not None:
            self.knowledge = collected.knowledge
        summary = collected.summary
        finished = summary.finished_at
        if due and summary.janitor.complete and collected.stopped_by_guard is None:
            self._janitor_ran_at = started
        if collected.paused is not None:
            outcome = RoundOutcome.PAUSED  # paused mid-round: its summary says what was done
        elif collected.stopped_by_guard is not None:
            outcome = RoundOutcome.GUARD_STOPPED
        elif not summary.success:
            outcome = RoundOutcome.FAILED
        elif summary.deleted > 0:
            outcome = RoundOutcome.COLLECTED
        else:
            outcome = RoundOutcome.IDLE
        if outcome in (RoundOutcome.COLLECTED, RoundOutcome.IDLE):
            self.last_success_at = finished
        return RoundReport(
            outcome,
            self.state,
            collected=collected,
            error=collected.paused,
            finished_at=finished,
        )

    def _untrusted(self, message: str) -> RoundReport:
        with self._lock:
            if self.tracker.is_blocked and self._state is CollectorState.RUNNING:
                self._state = CollectorState.SAFETY_BLOCKED
                self._blocked_reason = (
                    f"{self.tracker.consecutive_failures} untrusted M computations in a row, "
                    f"last: {message}"
                )
                log.error(
                    "collector safety_blocked: %s; nothing will be deleted until "
                    "`epochgc gc reset` (after fixing that content)",
                    self._blocked_reason,
                )
            state = self._state
        outcome = (
            RoundOutcome.BLOCKED if state is CollectorState.SAFETY_BLOCKED else RoundOutcome.FAILED
        )
        return RoundReport(outcome, state, error=message, finished_at=datetime.now(UTC))
