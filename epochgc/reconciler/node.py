"""A reconciler node: leads partitions, reconciles them, keeps idle ones
moving, and publishes its node report.

Each round (``run_round``):

1. Catch up with the controller (when the read fails, the round goes on
   with the view it had, reconciling and reporting what it leads but
   leading nothing new: one failed request must not cost a node its
   report, and a topic deleted meanwhile must not be led again); hold the
   node lease (``{root}/meta/
   nodes/{node_id}``, one per node whatever it owns); every
   ``ownership_interval_seconds`` run an ownership round (in ``run``, from a
   task of its own; when rounds are driven one by one, from the round)
   (``NodeOwnership.run_round``: LIST the nodes and ownership records,
   take this node's free partitions, hand back the ones another live node
   should have). Lead exactly ``owned()``: for each partition newly owned,
   open the replica, start a leader at the ownership record's term (raised
   above the highest term the partition log holds, so whatever a previous
   leader left in flight is superseded) and register its leader service
   with the directory.
2. Drop partitions no longer owned (handed back, taken over, the node
   lease lapsed) or whose leader failed (a failed leader's term is spent:
   the next round raises the record's term and starts again).
3. Reconcile each led partition (one pass, bounded concurrency). A
   partition whose next placeholder's L0 object is missing or corrupt is
   *stuck*: its cause goes into the node report and the metrics, a WARNING
   is logged once per cause, and the read is retried every
   ``stuck_retry_seconds`` (the object may come back). Meanwhile the leader
   checks its log tail each round: an operator's ``partition skip`` appends
   there, and a new term (next round) replays it and moves on.
4. Housekeeping: a fully reconciled partition whose ``M(p)`` has not moved
   for ``idle_interval_seconds`` fences the current cluster epoch and
   appends ``advance_epoch``; the next pass records it, lifting ``M(p)``.
5. Recompute each partition's retention hint from its topic's
   ``retention.local.target.*`` config, then snapshot partitions every
   ``snapshot_every_entries`` entries (truncating up to ``min(lro + 1,
   hint)``, or ``lro + 1`` when the log exceeds ``max_log_entries``).
6. Publish the node report every ``report_interval_seconds``.

``stop()`` stops the leader services, then releases every ownership record
and the node lease, so the other nodes take over at their next round.

Liveness is progress, not a heartbeat (``run``). The node lease is renewed
by a heartbeat thread whatever the loops do, so ``run`` watches its two
loops, ``rounds`` (the rounds above: lead, reconcile, housekeep, report)
and ``ownership`` (take and hand back), with a ``ProgressWatchdog``: each
reports every round it completes (a round that failed on an
``EpochGCError`` and is retried next time counts). A loop that has
completed none for ``max_round_seconds`` (plus its own pause between
rounds), or that ends on any other exception, stops the node:

1. At once, from any thread: the lease's renewal gate closes (the
   watchdog's verdict is latched), so the heartbeat renews no more, the
   lease is not valid on the node's own clock, ``owned()`` is empty and
   every leader's lease check before an append fails: the node writes no
   partition log entry and no ownership record from then on.
2. One line at ERROR, ``node ID: loop LOOP stopped: CAUSE; ...``; the
   exception's stack, or the hung loop's, at DEBUG.
3. It lets go, within one lease TTL: the node lease is released first,
   then the leaders are stopped and the ownership records released
   (``_let_go``). Releasing is right here, unlike a kill -9's silence:
   the node has stopped writing (step 1), and a request already sent when
   the loop hung (it may still land) is fenced like one in flight at a
   kill: a peer that takes a partition starts a higher term, and the
   log's ``term_start`` supersedes anything of ours that lands after it.
   So the peers take over at their next round instead of a TTL later.
   What cannot be released in time (a lock held by the hung round) is
   left to expire: no renewal comes, so the peers take over after the TTL.
4. ``run`` raises ``LoopStoppedError``; the process exits non-zero
   (``epochgc reconciler``) and its supervisor restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from epochgc.errors import (
    EpochGCError,
    L0UnreadableError,
    LeaseLostError,
    LoopStoppedError,
    RecordError,
    StorageError,
)
from epochgc.ownership.node_ownership import NodeOwnership, RoundReport
from epochgc.ownership.pacing import OwnershipPacing, stale_look_fraction
from epochgc.reconciler.reconcile import Reconciler
from epochgc.reconciler.retention import RetentionTargets, update_retention_hint
from epochgc.reconciler.topics import epochgc_topics
from epochgc.reconciler.watchdog import LoopStall, ProgressWatchdog
from epochgc.storage.keys import PartitionId, report_key
from epochgc.storage.object_store import ObjectStore, get_or_none
from epochgc.watermarks.controller import Controller, ControllerView, TopicInfo
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.partition.fence import FenceStats
from epochgc.watermarks.partition.leader import PartitionLeaderService
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.term_writer import TermWriter
from epochgc.watermarks.safe_epoch.reports import (
    PartitionReport,
    SafeEpochRule,
    StuckCause,
    carried_entries,
    decode_report,
    publish_report,
    read_reports,
    report_of,
    safe_epoch_rule,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")


ROUNDS_LOOP = "rounds"
"""The loop that leads, reconciles, housekeeps and reports."""
OWNERSHIP_LOOP = "ownership"
"""The loop that takes and hands back partitions."""
DEFAULT_BOUND_TTLS = 4.0
"""``max_round_seconds`` 0 means this many lease TTLs."""
RAISE_TERM_WAIT_SHARE = 0.25
"""The rounds loop waits at most this share of ``max_round_seconds`` for
the ownership loop's round to let it raise a record's term: a hung
ownership round then leaves the rounds loop completing rounds, and the
watchdog names the loop that hung."""


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


@dataclass
class _Led:
    service: PartitionLeaderService
    term: int
    last_safe_epoch: int
    safe_epoch_moved_at: float
    stuck: StuckCause | None = None
    stuck_retry_at: float = 0.0


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


class ReconcilerNode:
    """One node of the reconciler tier.

    Example::

        ownership = NodeOwnership(store, "epochgc", NodeLease(store, "epochgc", "node-1"),
                                  max_moves_per_round=128)
        node = ReconcilerNode(store, "epochgc", "node-1", ownership, directory)
        ownership.start()       # the node lease's heartbeat
        await node.run_round()
        await node.stop()       # steps down, releases records and the node lease
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        node_id: str,
        ownership: NodeOwnership,
        directory: LeaderDirectory,
        *,
        settings: NodeSettings | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_round: Callable[[float], None] | None = None,
        safe_epoch_rule: SafeEpochRule = safe_epoch_rule,
    ) -> None:
        """``safe_epoch_rule`` is how the node's reports compute ``M(p)``:
        always the safe rule, except in ``epochgc verify``'s worker
        processes, whose composition passes the deliberately unsafe build's
        rule (no setting or environment variable reaches it)."""
        self._store = store
        self._root = root
        self.node_id = node_id
        self._ownership = ownership
        self._last_ownership_round = float("-inf")
        self._ownership_loop_running = False
        self._view_ready = asyncio.Event()
        self._ownership_thread = ThreadPoolExecutor(1, thread_name_prefix=f"ownership-{node_id}")
        """Ownership rounds run here, not in the default executor, where a
        node opening a hundred partitions queues its requests: a takeover
        or a hand-back must not wait behind them."""
        self._directory = directory
        self._settings = settings or NodeSettings()
        self._monotonic = monotonic
        self._now = now
        self._controller = Controller(store, root)
        self._reconciler = Reconciler(store, root, max_records=self._settings.max_records_per_pass)
        self._led: dict[PartitionId, _Led] = {}
        self._last_report = float("-inf")
        self._on_round = on_round
        self._safe_epoch_rule = safe_epoch_rule
        self._reported: dict[PartitionId, PartitionReport] | None = None
        self._live: set[PartitionId] = set()
        self._view: ControllerView | None = None
        """The last controller view read (a round whose read fails uses it)."""
        self.stats = NodeStats()
        bound = self._settings.max_round_seconds or (
            DEFAULT_BOUND_TTLS * ownership.lease.policy.ttl_seconds
        )
        self._watchdog = ProgressWatchdog(bound, bound_name="reconciler.max_round_seconds")
        self._announced = threading.Lock()
        self._announce_done = False
        ownership.lease.set_renewal_gate(self._closed_by)

    @property
    def watchdog(self) -> ProgressWatchdog:
        return self._watchdog

    def stall(self) -> LoopStall | None:
        """The loop that stopped the node, and why; ``None`` while every
        loop completes rounds (for ``/healthz``; any thread)."""
        return self._watchdog.check(self._monotonic())

    def _closed_by(self) -> str | None:
        stall = self.stall()
        return None if stall is None else stall.describe()

    def stall_line(self, stall: LoopStall) -> str:
        """The one line that says the node stops, and why."""
        return (
            f"node {self.node_id}: {stall.describe()}; it renews its lease no more, "
            "lets go of its partitions and exits, for its supervisor to restart it"
        )

    def announce_stall(self, stall: LoopStall, stack: str = "") -> None:
        """Log the stall once (whichever of the node and the process's
        backstop sees it first): one line at ERROR, the stack at DEBUG."""
        with self._announced:
            if self._announce_done:
                return
            self._announce_done = True
        log.error("%s", self.stall_line(stall))
        if stall.error is not None:
            log.debug("node %s: loop %s died here", self.node_id, stall.loop, exc_info=stall.error)
        elif stack:
            log.debug("node %s: loop %s hangs here:\n%s", self.node_id, stall.loop, stack)

    @property
    def controller(self) -> Controller:
        return self._controller

    @property
    def ownership(self) -> NodeOwnership:
        return self._ownership

    def led_partitions(self) -> list[PartitionId]:
        return sorted(self._led)

    async def run_round(self) -> None:
        """One round of every duty (see the module docstring)."""
        started = self._monotonic()
        fresh = True
        try:
            view = await asyncio.to_thread(self._controller.snapshot)
        except StorageError as err:
            if self._view is None:
                raise
            # Reconciling and reporting what is led already is as right on
            # the view of a moment ago as it was then; leading anything new
            # is not (the topic may be gone and its log with it).
            view, fresh = self._view, False
            self.stats.errors += 1
            log.warning(
                "%s: controller unreadable, this round reconciles and reports on its view "
                "at offset %d and leads nothing new: %s",
                self.node_id,
                view.offset,
                err,
            )
        self._view = view
        topics = epochgc_topics(view.topics)
        if fresh:
            self._live = {pid for topic in topics.values() for pid in topic.partition_ids()}
            self._view_ready.set()
            if not self._ownership_loop_running:
                await self._ownership_round(self._live)
        await self._drop_lost(self._live)
        if fresh:
            await self._lead_new(self._live)
        await self._reconcile_all(topics)
        await self._housekeep(view.offset)
        await self._publish_report()
        self.stats.rounds += 1
        self.stats.last_round_seconds = self._monotonic() - started
        self.stats.led = [f"{pid.topic}/{pid.partition}" for pid in self.led_partitions()]
        if self._on_round is not None:
            self._on_round(self.stats.last_round_seconds)

    def led_services(self) -> list[PartitionLeaderService]:
        """The leader services of the partitions led now (for metrics)."""
        return [led.service for led in list(self._led.values())]

    async def run(self, stop: asyncio.Event, *, round_interval_seconds: float = 1.0) -> None:
        """Run rounds until ``stop`` is set, then ``stop()`` the node.

        Ownership rounds run in a task of their own, every
        ``ownership_interval_seconds``, so a long reconciler round (a node
        opening a hundred partitions it just took) delays neither a
        takeover nor a hand-back. Both loops are watched (module
        docstring): one that stops completing rounds or dies stops the node.

        Raises:
            LoopStoppedError: a loop stopped; the node has let go.
        """
        self._ownership_loop_running = True
        self._watchdog.watch(
            ROUNDS_LOOP, self._monotonic(), allowance_seconds=round_interval_seconds
        )
        tasks = {
            ROUNDS_LOOP: asyncio.create_task(
                self._watched(ROUNDS_LOOP, self._round_loop(stop, round_interval_seconds), stop),
                name=f"{self.node_id}-{ROUNDS_LOOP}",
            ),
            OWNERSHIP_LOOP: asyncio.create_task(
                self._watched(OWNERSHIP_LOOP, self._ownership_loop(stop), stop),
                name=f"{self.node_id}-{OWNERSHIP_LOOP}",
            ),
        }
        stall: LoopStall | None = None
        try:
            stall = await self._supervise(tasks[ROUNDS_LOOP])
        finally:
            if stall is None:  # asked to stop (or cancelled)
                for loop in tasks:
                    self._watchdog.unwatch(loop)
                for task in tasks.values():
                    task.cancel()
                await asyncio.gather(*tasks.values(), return_exceptions=True)
                self._ownership_loop_running = False
                await self.stop()
        if stall is None:
            return
        await self._stop_stalled(stall, tasks)
        raise LoopStoppedError(self.stall_line(stall), stall)

    async def _supervise(self, rounds: asyncio.Task[None]) -> LoopStall | None:
        """Wait until the rounds loop ends on request (``None``) or a loop
        is judged stopped (the verdict)."""
        poll = max(0.01, min(0.5, self._watchdog.bound_seconds / 8))
        while not rounds.done():
            stall = self.stall()
            if stall is not None:
                return stall
            await asyncio.wait({rounds}, timeout=poll)
        return self.stall()

    async def _watched(
        self, loop: str, body: Coroutine[object, object, None], stop: asyncio.Event
    ) -> None:
        """Run a loop; any exception it ends on (not only ``EpochGCError``)
        is its death, and so is ending before ``stop`` is set."""
        try:
            await body
        except asyncio.CancelledError:
            raise
        except Exception as err:
            self._watchdog.died(loop, err, self._monotonic())
            return
        if not stop.is_set():
            self._watchdog.died(loop, "it ended without being asked to", self._monotonic())

    async def _round_loop(self, stop: asyncio.Event, interval: float) -> None:
        while not stop.is_set():
            try:
                await self.run_round()
            except EpochGCError as err:
                self.stats.errors += 1
                self.stats.round_failures += 1
                log.warning("%s: round failed: %s", self.node_id, err)
            self._watchdog.completed(ROUNDS_LOOP, self._monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)

    async def _ownership_loop(self, stop: asyncio.Event) -> None:
        """Ownership rounds on their own schedule (once the first reconciler
        round has read the controller: the partitions to share). Watched
        from then on: before, the rounds loop is the one to judge."""
        await self._view_ready.wait()
        interval = max(0.05, self._settings.ownership_interval_seconds)
        self._watchdog.watch(OWNERSHIP_LOOP, self._monotonic(), allowance_seconds=interval)
        pacing = OwnershipPacing(interval, stale_look_fraction(self.node_id))
        while not stop.is_set():
            report = None
            try:
                report = await self._ownership_round(self._live, force=True)
            except EpochGCError as err:
                log.warning("%s: ownership round failed: %s", self.node_id, err)
            self._watchdog.completed(OWNERSHIP_LOOP, self._monotonic())
            stale_at = None if report is None else report.next_stale_at
            nodes = 0 if report is None else report.nodes
            wait = pacing.after_round(self._monotonic(), stale_at, nodes)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)

    async def _stop_stalled(
        self, stall: LoopStall, tasks: Mapping[str, asyncio.Task[None]]
    ) -> None:
        """A loop stopped: say so once, end the loops and let go (module
        docstring, steps 2 and 3). The lease gate closed with the verdict."""
        hung = tasks.get(stall.loop)
        self.announce_stall(stall, _stack_of(hung) if hung is not None else "")
        for task in tasks.values():
            task.cancel()
        # Cancelling an await on a hung thread returns at once; a loop that
        # swallows the cancellation is not waited for beyond this.
        await asyncio.wait(set(tasks.values()), timeout=1.0)
        self._ownership_loop_running = False
        budget = self._ownership.lease.policy.ttl_seconds
        try:
            await asyncio.wait_for(self._let_go(), budget)
        except TimeoutError:
            log.warning(
                "node %s: could not let go of everything within %.1fs; the rest goes to "
                "the other nodes when its lease expires",
                self.node_id,
                budget,
            )

    async def _let_go(self) -> None:
        """Release the node lease (the peers take over at their next round),
        then stop the leaders and release the ownership records. Each step
        in its own thread, so a lock held by a hung round delays only the
        steps that need it."""
        await asyncio.to_thread(self._ownership.lease.release)
        for key in list(self._led):
            await self._step_down(key, "node stopped making progress")
        await asyncio.to_thread(self._ownership.stop, release=True)

    async def stop(self) -> None:
        """Stop every leader service, then release every ownership record
        and the node lease (the others take over at their next round)."""
        for key in list(self._led):
            await self._step_down(key, "node stopping")
        await asyncio.to_thread(self._ownership.stop, release=True)

    # --- leadership --------------------------------------------------------------

    async def _ownership_round(
        self, live: set[PartitionId], *, force: bool = False
    ) -> RoundReport | None:
        """Hold the node lease; run an ownership round when one is due (or
        ``force``: the ownership loop keeps its own time). The round's
        report, or ``None`` when none ran."""
        now = self._monotonic()
        interval = self._settings.ownership_interval_seconds
        just_registered = False
        if not self._ownership.lease.is_valid():
            if not await self._in_ownership_thread(self._ownership.ensure_lease):
                return None  # a previous incarnation still holds it: wait its TTL out
            # A node that has just registered plans its first round one
            # interval later: the peers starting with it register meanwhile,
            # so it takes its share of a cluster, not all it alone can see
            # (only to hand most of it back a round later).
            self._last_ownership_round = now
            just_registered = True
        if (not force or just_registered) and now - self._last_ownership_round < interval:
            return None
        self._last_ownership_round = now
        report = await self._in_ownership_thread(self._ownership.run_round, frozenset(live))
        self.stats.ownership_rounds += 1
        self.stats.last_ownership = report
        if report.taken or report.taken_over or report.handed_back or report.lost:
            log.info(
                "%s: ownership round: took %d, took over %d, handed back %d, lost %d; owns %d",
                self.node_id,
                report.taken,
                report.taken_over,
                report.handed_back,
                report.lost,
                report.owned,
            )
        return report

    async def _lead_new(self, live: set[PartitionId]) -> None:
        """Start leading every partition owned but not led yet, several at
        once (``reconcile_concurrency``): opening a replica and writing its
        ``term_start`` is a few requests each, and a node taking over a
        dead node's hundred partitions must not do them one after another."""
        limit = asyncio.Semaphore(self._settings.reconcile_concurrency)

        async def one(pid: PartitionId) -> None:
            async with limit:
                await self._try_lead(pid)

        new = sorted(p for p in self._ownership.owned() - set(self._led) if p in live)
        await asyncio.gather(*(one(pid) for pid in new))

    async def _in_ownership_thread(self, fn: Callable[..., _T], *args: object) -> _T:
        return await asyncio.get_running_loop().run_in_executor(
            self._ownership_thread, functools.partial(fn, *args)
        )

    def _check_owned(self, pid: PartitionId, term: int) -> None:
        """The leader's guard before every append: still ours, at ``term``."""
        if self._ownership.term(pid) != term:
            raise LeaseLostError(f"{pid} is no longer owned by {self.node_id} at term {term}")

    async def _try_lead(self, pid: PartitionId) -> None:
        term = self._ownership.term(pid)
        if term is None:
            return
        try:
            replica = PartitionReplica(self._store, self._root, pid)
            await asyncio.to_thread(replica.open)
            if replica.state.term >= term:
                # The log holds our term or a higher one (an old leader's, a
                # spent term of ours): start above it so it is fenced. The
                # records are the ownership loop's too: a round of it hung
                # in the store must not hang this loop (its watchdog would
                # name this loop), so the wait is bounded; the next round
                # tries again.
                raised = await asyncio.to_thread(
                    functools.partial(
                        self._ownership.raise_term,
                        pid,
                        replica.state.term,
                        wait_seconds=self._watchdog.bound_seconds * RAISE_TERM_WAIT_SHARE,
                    )
                )
                if raised is None:
                    return
                term = raised
            leader = TermWriter(
                replica,
                term,
                check_lease=lambda: self._check_owned(pid, term),
                depth=self._settings.append_depth,
            )
            await asyncio.to_thread(leader.start)
        except EpochGCError as err:
            self.stats.errors += 1
            log.warning("%s: could not lead %s: %s", self.node_id, pid, err)
            return
        service = PartitionLeaderService(leader)
        service.start()
        await self._directory.register(service)
        state = replica.state
        self._led[pid] = _Led(service, term, state.safe_epoch, self._monotonic())
        self.stats.leaderships += 1
        log.info("%s: leading %s at term %d", self.node_id, pid, term)

    async def _drop_lost(self, live: set[PartitionId]) -> None:
        for key, led in list(self._led.items()):
            if key not in live:
                await self._step_down(key, "topic deleted or not epochgc's")
            elif self._ownership.term(key) != led.term:
                self.stats.lost_leaderships += 1
                await self._step_down(key, "no longer owned")
            elif not led.service.is_open:
                # The leader failed an append: its term is spent. The next
                # _try_lead raises the record's term above it.
                await self._step_down(key, "leader failed")

    async def _step_down(self, key: PartitionId, reason: str) -> None:
        led = self._led.pop(key, None)
        if led is None:
            return
        await self._directory.unregister(led.service)
        await led.service.stop(reason)
        self._retire(led.service)
        log.info("%s: stopped leading %s: %s", self.node_id, key, reason)

    def _retire(self, service: PartitionLeaderService) -> None:
        fence, retired = service.fence.stats, self.stats.retired_fence
        retired.accepted_same_epoch += fence.accepted_same_epoch
        retired.accepted_new_epoch += fence.accepted_new_epoch
        retired.rejected_below += fence.rejected_below
        retired.window_slides += fence.window_slides
        self.stats.retired_appends += service.stats.appended

    # --- duties ----------------------------------------------------------------------

    async def _reconcile_all(self, topics: Mapping[str, TopicInfo]) -> None:
        limit = asyncio.Semaphore(self._settings.reconcile_concurrency)

        async def one(key: PartitionId, led: _Led) -> None:
            async with limit:
                topic = topics.get(key.topic)
                if not led.service.is_open or topic is None or topic.revision != key.revision:
                    return
                leader = led.service.leader
                if led.stuck is not None:
                    try:
                        if await asyncio.to_thread(leader.check_foreign_entries):
                            return  # a partition skip landed: a new term replays it
                    except EpochGCError as err:
                        log.warning("%s: checking the log of %s failed: %s", self.node_id, key, err)
                    if self._monotonic() < led.stuck_retry_at:
                        return
                try:
                    result = await asyncio.to_thread(self._reconciler.reconcile_once, leader)
                    await asyncio.to_thread(
                        update_retention_hint,
                        leader,
                        RetentionTargets.of(topic.config),
                        self._now(),
                        self._controller.epoch_started_at,
                    )
                    await asyncio.to_thread(
                        leader.maybe_snapshot,
                        self._settings.snapshot_every_entries,
                        self._settings.max_log_entries,
                    )
                except L0UnreadableError as err:
                    self._mark_stuck(key, led, err)
                    return
                except EpochGCError as err:
                    self.stats.errors += 1
                    log.warning("%s: reconciling %s failed: %s", self.node_id, key, err)
                    return
                if led.stuck is not None:
                    log.info("%s: %s is no longer stuck", self.node_id, key)
                    led.stuck = None
                self.stats.records_reconciled += result.records
                self.stats.bytes_reconciled += result.bytes_written
                self.stats.l1_objects += 1 if result.l1_key else 0

        await asyncio.gather(*(one(k, led) for k, led in list(self._led.items())))

    def _mark_stuck(self, key: PartitionId, led: _Led, err: L0UnreadableError) -> None:
        """Record why ``key`` cannot be reconciled; WARNING once per cause
        (not every retry), with the way out."""
        self.stats.errors += 1
        led.stuck_retry_at = self._monotonic() + self._settings.stuck_retry_seconds
        previous = led.stuck
        same = previous is not None and (
            previous.cause,
            previous.key,
            previous.first_offset,
            previous.last_offset,
        ) == (err.cause, err.key, err.first_record, err.last_record)
        if same:
            return
        led.stuck = StuckCause(
            err.cause, err.key, err.first_record, err.last_record, self._now(), err.detail
        )
        log.warning(
            "%s: %s is stuck: L0 object %s is %s (records %d..%d): %s; retrying every %gs. "
            "If it will not come back: epochgc partition skip %s %d --through %d "
            "--accept-data-loss",
            self.node_id,
            key,
            err.key,
            err.cause,
            err.first_record,
            err.last_record,
            err.detail,
            self._settings.stuck_retry_seconds,
            key.topic,
            key.partition,
            err.last_record,
        )

    def stuck_partitions(self) -> dict[PartitionId, StuckCause]:
        """The led partitions that cannot be reconciled now, with the cause."""
        return {
            pid: led.stuck
            for pid, led in list(self._led.items())
            if led.stuck is not None and led.service.is_open
        }

    async def _housekeep(self, cluster_epoch: int) -> None:
        now = self._monotonic()
        for key, led in list(self._led.items()):
            state = led.service.leader.replica.state
            if state.safe_epoch != led.last_safe_epoch:
                led.last_safe_epoch = state.safe_epoch
                led.safe_epoch_moved_at = now
                continue
            idle_for = now - led.safe_epoch_moved_at
            if (
                state.is_fully_reconciled
                and idle_for >= self._settings.idle_interval_seconds
                and cluster_epoch > state.max_applied_epoch
                and led.service.is_open
            ):
                try:
                    await led.service.advance_epoch(cluster_epoch)
                except EpochGCError as err:
                    self.stats.errors += 1
                    log.warning("%s: housekeeping %s failed: %s", self.node_id, key, err)
                    continue
                self.stats.housekeeping_advances += 1
                led.safe_epoch_moved_at = now

    async def _publish_report(self, *, force: bool = False) -> None:
        if not self._settings.publish_reports:
            return
        now = self._monotonic()
        if not force and now - self._last_report < self._settings.report_interval_seconds:
            return
        led = [
            (pid, led.service.leader.replica.state)
            for pid, led in sorted(self._led.items())
            if led.service.is_open
        ]
        carried = await asyncio.to_thread(self._carried, [pid for pid, _ in led])
        report = report_of(
            self.node_id,
            self._now(),
            led,
            carried.values(),
            self.stuck_partitions(),
            rule=self._safe_epoch_rule,
        )
        # Remembered before the PUT: its entries are true whether or not the
        # PUT lands, and one that lands with its answer lost must not be
        # followed by a report carrying the older entries (M would dip).
        self._reported = {e.pid: e for e in report.partitions}
        await asyncio.to_thread(publish_report, self._store, self._root, report)
        self._last_report = now
        self.stats.reports_published += 1

    def _carried(self, led: list[PartitionId]) -> dict[PartitionId, PartitionReport]:
        """Entries of partitions this node reported before but leads no
        more, kept until another node covers them (``carried_entries``).
        The first time, the node's own last report (from a previous run of
        this node id) is the starting point."""
        if self._reported is None:
            stored = get_or_none(self._store, report_key(self._root, self.node_id))
            try:
                own = None if stored is None else decode_report(stored.body)
            except RecordError as err:
                log.warning(
                    "%s: own previous report unreadable, not carried: %s", self.node_id, err
                )
                own = None
            self._reported = {} if own is None else {e.pid: e for e in own.partitions}
        if not set(self._reported) - set(led):
            return {}
        reports, _skipped = read_reports(self._store, self._root)
        return carried_entries(self.node_id, self._reported, led, self._live, reports)


def _stack_of(task: asyncio.Task[None]) -> str:
    """Where ``task`` is waiting (for the DEBUG line of a hung loop)."""
    out = io.StringIO()
    task.print_stack(file=out)
    return out.getvalue()
