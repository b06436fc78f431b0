"""A reconciler node's supervisor: its two loops (rounds and ownership),
the watchdog that judges them, and letting go when one stops.

What a round does is composed here from the node's parts: which
partitions it leads is ``leadership.py`` (term raise, replica open,
pipeline, directory), the work on them is ``duties.py`` (reconcile, stuck
partitions, housekeeping, the node report), and its settings and counters
are ``node_settings.py``.

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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from epochgc.errors import (
    EpochGCError,
    LoopStoppedError,
    StorageError,
)
from epochgc.events import Event, EventChannel
from epochgc.leases.node_lease import held_incarnation
from epochgc.ownership.node_ownership import NodeOwnership, RoundReport
from epochgc.ownership.pacing import OwnershipPacing, stale_look_fraction
from epochgc.reconciler.duties import NodeDuties
from epochgc.reconciler.leadership import Leadership
from epochgc.reconciler.node_settings import NodeSettings, NodeStats
from epochgc.reconciler.topics import epochgc_partitions, epochgc_topics
from epochgc.reconciler.watchdog import (
    OWNERSHIP_LOOP,
    ROUNDS_LOOP,
    LoopStall,
    ProgressWatchdog,
    round_bound_seconds,
)
from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller, ControllerView
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.partition.leader import PartitionLeaderService
from epochgc.watermarks.safe_epoch.reports import (
    SafeEpochRule,
    safe_epoch_rule,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")


RAISE_TERM_WAIT_SHARE = 0.25
"""The rounds loop waits at most this share of ``max_round_seconds`` for
the ownership loop's round to let it raise a record's term: a hung
ownership round then leaves the rounds loop completing rounds, and the
watchdog names the loop that hung."""


@dataclass(frozen=True)
class ReconcilerRoundEnded(Event):
    """A node completed a round of its rounds loop (the process's metrics
    observe its duration)."""

    node_id: str
    seconds: float


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
        events: EventChannel | None = None,
        safe_epoch_rule: SafeEpochRule = safe_epoch_rule,
    ) -> None:
        """``safe_epoch_rule`` is how the node's reports compute ``M(p)``:
        always the safe rule, except in ``epochgc verify``'s worker
        processes, whose composition passes the deliberately unsafe build's
        rule (no setting or environment variable reaches it). ``events``:
        where each completed round is published (``ReconcilerRoundEnded``)."""
        self.node_id = node_id
        self._ownership = ownership
        self._last_ownership_round = float("-inf")
        self._ownership_loop_running = False
        self._view_ready = asyncio.Event()
        self._ownership_thread = ThreadPoolExecutor(1, thread_name_prefix=f"ownership-{node_id}")
        """Ownership rounds run here, not in the default executor, where a
        node opening a hundred partitions queues its requests: a takeover
        or a hand-back must not wait behind them."""
        self._settings = settings or NodeSettings()
        self._monotonic = monotonic
        self._controller = Controller(store, root)
        self._events = events if events is not None else EventChannel()
        self._live: set[PartitionId] = set()
        self._view: ControllerView | None = None
        """The last controller view read (a round whose read fails uses it)."""
        self.stats = NodeStats()
        bound = round_bound_seconds(
            self._settings.max_round_seconds, ownership.lease.policy.ttl_seconds
        )
        self._watchdog = ProgressWatchdog(bound, bound_name="reconciler.max_round_seconds")
        self._announced = threading.Lock()
        self._announce_done = False
        self.leadership = Leadership(
            store,
            root,
            node_id,
            ownership,
            directory,
            settings=self._settings,
            stats=self.stats,
            monotonic=monotonic,
            raise_term_wait_seconds=bound * RAISE_TERM_WAIT_SHARE,
        )
        self.duties = NodeDuties(
            store,
            root,
            node_id,
            self.leadership,
            self._controller,
            settings=self._settings,
            stats=self.stats,
            monotonic=monotonic,
            now=now,
            safe_epoch_rule=safe_epoch_rule,
            incarnation=lambda: held_incarnation(ownership.lease),
        )
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
        return self.leadership.partitions()

    @property
    def live_partitions(self) -> set[PartitionId]:
        """The partitions of live epochgc topics, as of the last controller
        view read."""
        return self._live

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
            only = self._settings.only_partitions
            self._live = {
                pid
                for pid in epochgc_partitions(view.topics)
                if not only or (pid.topic, pid.partition) in only
            }
            self._view_ready.set()
            if not self._ownership_loop_running:
                await self._ownership_round(self._live)
        await self.leadership.drop_lost(self._live)
        if fresh:
            await self.leadership.lead_new(self._live)
        await self.duties.reconcile_all(topics)
        await self.duties.housekeep(view.offset)
        await self.duties.publish_report(self._live)
        self.stats.rounds += 1
        self.stats.last_round_seconds = self._monotonic() - started
        self.stats.led = [f"{pid.topic}/{pid.partition}" for pid in self.led_partitions()]
        self._events.publish(ReconcilerRoundEnded(self.node_id, self.stats.last_round_seconds))

    def led_services(self) -> list[PartitionLeaderService]:
        """The leader services of the partitions led now (for metrics)."""
        return self.leadership.services()

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
        await self.leadership.step_down_all("node stopped making progress")
        await asyncio.to_thread(self._ownership.stop, release=True)

    async def stop(self) -> None:
        """Stop every leader service, then release every ownership record
        and the node lease (the others take over at their next round)."""
        await self.leadership.step_down_all("node stopping")
        await asyncio.to_thread(self._ownership.stop, release=True)

    # --- ownership -------------------------------------------------------------

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

    async def _in_ownership_thread(self, fn: Callable[..., _T], *args: object) -> _T:
        return await asyncio.get_running_loop().run_in_executor(
            self._ownership_thread, functools.partial(fn, *args)
        )


def _stack_of(task: asyncio.Task[None]) -> str:
    """Where ``task`` is waiting (for the DEBUG line of a hung loop)."""
    out = io.StringIO()
    task.print_stack(file=out)
    return out.getvalue()
