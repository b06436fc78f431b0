"""One collection round with the local engine: ``epochgc gc collect``.
It follows the protocol every engine follows (``round_protocol``: open,
guarded passes, summary); what is its own is how a pass runs (the
sweeper, over shards, in this process) and what a long-lived collector
keeps between rounds (the shard knowledge, the janitor).

``collect_once`` reads as the round runs, one step per function; the values
the steps share (``M``, the pause guard, the sweeper, when it started...)
are fixed when it opens, in one ``_RoundContext``:

1. ``_open_round``: compute ``M`` (controller tail + one report per node).
   Untrusted inputs: no deletion, ``SafetyBlockedError``.
2. ``_choose_shards``: which shards the round lists, decided in
   ``gc.listing.plan`` (start there). Every shard present in the bucket (a
   delimiter listing of ``{root}/l0/``, ``gc.listing.shards``), not
   ``0..layout.l0_shards-1``. With a listing policy
   (``CollectSettings.listing``, on in the product), only the shards the
   cost-aware schedule picks (``gc.listing.schedule``) from the shard
   knowledge, running the delimiter listing only when it lists something or
   its list of shards is stale. Times in the knowledge are another
   collector's clock: one ahead of ours by more than
   ``clock_skew_margin_seconds`` is unknown (that shard is listed, the full
   sweep or discovery is due; ``gc.listing.knowledge.trust_knowledge``),
   logged once per writer and never written back. A dry run and
   ``all_shards`` list every shard.
3. ``_sweep``: unless it is a dry run, read ``{root}/gc/control.json``
   (through the ``gc.pause`` guard): paused means no deletion,
   ``CollectorPausedError`` (``paused by WHO: REASON``). ``force`` never
   overrides a pause.

   With the delete-fraction guard on (``max_delete_fraction < 1``) and no
   ``force``, a counting pass lists every shard to its end and counts what
   it sees (objects, bytes, what is eligible), keeping no key. A round that
   would delete more than the allowed share of what it listed stops there,
   deleting nothing. Otherwise the control document is read again (a pause
   may have come during the count) and a deleting pass streams.

   The deleting pass (also the whole round with the guard off or forced)
   streams: list, delete, stop each shard at its first key above ``M``.
   Memory is bounded by the batches in flight, whatever the bucket holds.
   Its store asks the pause before every DeleteObjects (``GuardedStore``):
   a pause that lands mid-pass stops it before its next batch, the round
   ends with ``CollectOutcome.paused`` and its summary says so.

   ``--dry-run`` deletes nothing and streams the plan (key, size,
   last_modified) into a Parquet file beside the summary.
4. ``_learn``: a round that finished writes what its listings learnt into
   the knowledge (``{root}/gc/shards/state``).
5. ``_clean_up``: the janitor, when the caller passes one, runs only if the
   round was not stopped or paused, after the pause is read once more.
6. ``_summarise``: every run writes ``{root}/gc/runs/{run_id}/summary.json``,
   with its requests and their modelled cost (``gc.listing.cost``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

from epochgc.errors import CollectorPausedError, StorageError
from epochgc.events import EventChannel
from epochgc.gc.control import DeletingJob
from epochgc.gc.deletion_record import DeletionRecord, open_record
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.janitor import Janitor, JanitorResult
from epochgc.gc.listing.cost import Prices
from epochgc.gc.listing.knowledge import ShardKnowledge, trust_knowledge
from epochgc.gc.listing.plan import (
    ShardChoice,
    choose_from_discovery,
    choose_from_knowledge,
    learn_from_listings,
)
from epochgc.gc.listing.schedule import ListingPolicy
from epochgc.gc.listing.shards import discover_shards, load_knowledge, save_knowledge
from epochgc.gc.pause import GuardedStore, PauseGuard
from epochgc.gc.plan_file import PlanWriter
from epochgc.gc.round_protocol import PassesOutcome, open_round, run_guarded_passes
from epochgc.gc.run_report import RunShards, RunSummary, unparseable_note, write_summary
from epochgc.gc.sweeper import DeleteBatchDone, ObjectsPlanned, Sweeper, SweepPolicy, SweepResult
from epochgc.runtime import SYSTEM, Runtime, StopSignal
from epochgc.storage.keys import gc_run_deleted_key, gc_run_prefix
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.stored_time import DEFAULT_MARGIN_SECONDS
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import SafeEpoch, SafeEpochTracker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CollectSettings:
    """What a round needs from ``[gc]``. Which shards it sweeps is not a
    setting: every shard present in the bucket."""

    min_object_age: timedelta
    max_delete_fraction: float
    shard_concurrency: int = 8
    delete_concurrency: int = 4
    rate_limit_keys_per_second: float | None = None
    listing: ListingPolicy | None = None
    """The cost-aware schedule; ``None`` lists every shard every round."""
    prices: Prices = dataclasses.field(default_factory=Prices)
    """What the run summary's cost is modelled at (``[cost]``)."""
    clock_skew_margin_seconds: float = DEFAULT_MARGIN_SECONDS
    """A stored time ahead of this collector's clock by more than this is
    unknown (``epochgc.storage.stored_time``; ``gc.clock_skew_margin_seconds``)."""
    record_deletions: bool = True
    """Write the keys deleted beside the summary (``gc.deletion_record``)."""


@dataclass(frozen=True)
class CollectOutcome:
    """A finished round: its summary, where it was written, and why it
    stopped early if it did."""

    summary: RunSummary
    summary_key: str
    plan_key: str | None
    stopped_by_guard: str | None
    safe: SafeEpoch
    """The ``M`` the round used, with its pinning partitions."""
    youngest_too_young: datetime | None = None
    """Last-modified time of the youngest object skipped as too young: when
    it ages in, a round has work again."""
    bytes_listed: int = 0
    """Bytes of the L0 objects the round listed (with the guard on: every
    L0 object in the bucket before the round); minus ``bytes_deleted``, the
    bytes outstanding."""
    foreign_prefixes: int = 0
    """Prefixes under ``{root}/l0/`` that are not shards (never swept)."""
    knowledge: ShardKnowledge | None = None
    """The shard knowledge after the round (with a listing policy)."""
    next_listing_at: datetime | None = None
    """When the schedule next finds a shard worth listing (with a policy)."""
    paused: str | None = None
    """``paused by WHO: REASON`` when a pause that came after the round's
    first read stopped its deleting pass or held its janitor."""


def collect_once(
    store: ObjectStore,
    stats: RequestStats,
    root: str,
    settings: CollectSettings,
    *,
    tracker: SafeEpochTracker | None = None,
    dry_run: bool = False,
    force: bool = False,
    now: datetime | None = None,
    stop: StopSignal | None = None,
    controller: Controller | None = None,
    janitor: Janitor | None = None,
    knowledge: ShardKnowledge | None = None,
    all_shards: bool = False,
    guard: PauseGuard | None = None,
    writer: str = "",
    future_log: FutureTimeLog | None = None,
    events: EventChannel | None = None,
    runtime: Runtime = SYSTEM,
) -> CollectOutcome:
    """Run one round (see the module docstring).

    A long-lived caller passes its ``controller`` so each round reads only
    the controller log's new entries. The GC leader passes a ``janitor``
    when one is due: after the sweep (not in a dry run, nor when the guard
    stopped the round) it removes what deleted topic incarnations left, as
    judged against the controller view at that moment. A set ``stop`` event ends the round
    after the DeleteObjects batches in flight; the summary then says what
    was done (the next round finishes the job: nothing is lost).

    With ``settings.listing``, a long-lived caller passes the ``knowledge``
    the previous round returned (otherwise it is read from the bucket);
    ``all_shards`` lists every shard present whatever the schedule says.
    A long-lived caller passes its pause ``guard`` (it remembers what a
    pause held, for ``gc status``); the janitor's store should ask the same
    guard (``GuardedStore``). ``events`` is the channel ``store`` publishes
    ``Throttled`` on: the round's sweeper slows down on it, and publishes
    its own events there. ``runtime`` is the clocks, ids and workers the
    round runs on (the simulation's virtual ones, or production's).
    ``writer`` names this collector in the knowledge it writes; times from
    the future it reads go to ``future_log`` (a fresh one when omitted).

    Raises:
        SafetyBlockedError: ``M`` could not be computed from trusted inputs.
        CollectorPausedError: the collector is paused (not for a dry run).
        StorageError: the shards could not be listed.
    """
    ctx = _open_round(
        store,
        stats,
        root,
        settings,
        tracker=tracker,
        controller=controller,
        guard=guard,
        now=now,
        dry_run=dry_run,
        force=force,
        stop=stop,
        events=events,
        runtime=runtime,
    )
    choice = _choose_shards(ctx, knowledge, all_shards, future_log)
    swept = _sweep(ctx, choice.shards)
    learnt = _learn(ctx, choice, swept, writer)
    cleaned, paused = _clean_up(ctx, janitor, swept)
    return _summarise(ctx, choice, learnt, swept, cleaned, paused)


@dataclass(frozen=True)
class _RoundContext:
    """What the steps of one round share, fixed when it opens (step 1)."""

    run_id: str
    started_at: datetime
    """The round's ``now``: every age, due time and knowledge time uses it."""
    store: ObjectStore
    root: str
    settings: CollectSettings
    dry_run: bool
    stop: StopSignal | None
    safe: SafeEpoch
    """``M`` and where it came from."""
    controller: Controller
    guard: PauseGuard
    sweeper: Sweeper
    """Deletes through ``GuardedStore``: asks ``guard`` before every batch."""
    guarded: bool
    """The delete-fraction guard is on (``max_delete_fraction < 1``, no ``force``)."""
    # What the summary measures the round with:
    stats: RequestStats
    requests_before: Mapping[str, int]
    wall_clock: bool
    """No ``now`` was given: the round ends at the wall clock's time, otherwise
    at ``started_at`` plus the monotonic time it took."""
    monotonic_start: float
    runtime: Runtime

    @property
    def is_stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def finished_at(self) -> datetime:
        if self.wall_clock:
            return self.runtime.wall()
        return self.started_at + timedelta(seconds=self.runtime.monotonic() - self.monotonic_start)


@dataclass(frozen=True)
class _Swept:
    """What the sweep step did."""

    result: SweepResult
    stopped_by_guard: str | None
    plan_key: str | None
    record_failed: str | None = None
    """Why the round's deletion record could not be written."""


def _open_round(
    store: ObjectStore,
    stats: RequestStats,
    root: str,
    settings: CollectSettings,
    *,
    tracker: SafeEpochTracker | None,
    controller: Controller | None,
    guard: PauseGuard | None,
    now: datetime | None,
    dry_run: bool,
    force: bool,
    stop: StopSignal | None,
    events: EventChannel | None,
    runtime: Runtime,
) -> _RoundContext:
    """Step 1: ``M`` from trusted inputs, the pause guard and the sweeper
    (built before any listing: its rate control hears the store's throttling).

    Raises:
        SafetyBlockedError: ``M`` could not be computed from trusted inputs.
    """
    monotonic_start = runtime.monotonic()
    requests_before = stats.by_operation()
    controller = controller or Controller(store, root, runtime=runtime)
    opened = open_round(
        store, root, tracker=tracker, controller=controller, now=now, runtime=runtime
    )
    guard = guard or PauseGuard(store, root, now=runtime.wall)
    sweeper = Sweeper(
        GuardedStore(store, guard, DeletingJob.L0),
        root,
        SweepPolicy(
            min_object_age=settings.min_object_age,
            shard_concurrency=settings.shard_concurrency,
            delete_concurrency=settings.delete_concurrency,
            rate_limit_keys_per_second=settings.rate_limit_keys_per_second,
        ),
        runtime=runtime,
        events=events,
    )
    return _RoundContext(
        run_id=opened.run_id,
        started_at=opened.started_at,
        store=store,
        root=root,
        settings=settings,
        dry_run=dry_run,
        stop=stop,
        safe=opened.safe,
        controller=controller,
        guard=guard,
        sweeper=sweeper,
        guarded=settings.max_delete_fraction < 1.0 and not force,
        stats=stats,
        requests_before=requests_before,
        wall_clock=now is None,
        monotonic_start=monotonic_start,
        runtime=runtime,
    )


def _choose_shards(
    ctx: _RoundContext,
    kept: ShardKnowledge | None,
    all_shards: bool,
    future_log: FutureTimeLog | None,
) -> ShardChoice:
    """Step 2: the shards the round lists (``gc.listing.plan`` decides).

    The knowledge is read from the bucket when the caller kept none, then
    through the stored-time rule, even when the caller kept it (its own
    clock may have been stepped back since). The delimiter listing runs
    only when the plan cannot choose without it."""
    store, root, now = ctx.store, ctx.root, ctx.started_at
    policy = None if ctx.dry_run else ctx.settings.listing
    loaded = load_knowledge(store, root) if policy is not None and kept is None else kept
    knowledge = None
    if loaded is not None:
        margin = ctx.settings.clock_skew_margin_seconds
        knowledge, future = trust_knowledge(loaded, now, margin)
        (future_log or FutureTimeLog()).note(future)
    safe_epoch = ctx.safe.safe_epoch
    choice = choose_from_knowledge(
        policy, knowledge, safe_epoch=safe_epoch, now=now, all_shards=all_shards
    )
    if choice is None:
        found = discover_shards(store, root)
        choice = choose_from_discovery(
            policy, knowledge, found, safe_epoch=safe_epoch, now=now, all_shards=all_shards
        )
    return choice


def _sweep(ctx: _RoundContext, shards: tuple[int, ...]) -> _Swept:
    """Step 3: list and delete (module docstring): a dry run writes the
    plan; with the guard on, a counting pass comes first; the pause is read
    before each pass."""
    safe = ctx.safe
    log.debug(
        "gc run %s: M=%d (controller offset %d), %d shards",
        ctx.run_id,
        safe.safe_epoch,
        safe.controller_offset,
        len(shards),
    )
    plan_key: str | None = None
    record_failed: str | None = None
    events = ctx.sweeper.events
    if ctx.dry_run:
        with (
            PlanWriter(with_last_modified=True) as plan,
            events.subscribed(ObjectsPlanned, plan.on_planned),
        ):
            outcome = _passes(ctx, _LocalPasses(ctx, shards))
            key = f"{gc_run_prefix(ctx.root, ctx.run_id)}plan.parquet"
            plan_key = plan.upload(ctx.store, key)
        assert outcome.done is not None, "a dry run always plans"
        result, stopped = outcome.done, outcome.stopped_by_guard
    else:
        on = ctx.settings.record_deletions
        with (
            open_record(ctx.root, safe.safe_epoch, on=on) as record,
            nullcontext()
            if record is None
            else events.subscribed(DeleteBatchDone, record.on_batch_done),
        ):
            outcome = _passes(ctx, _LocalPasses(ctx, shards))
            stopped = outcome.stopped_by_guard
            if outcome.done is None:
                assert outcome.counted is not None, "only a counting pass stops a round"
                result = outcome.counted
                log.warning("gc run %s stopped: %s", ctx.run_id, stopped)
            elif outcome.counted is not None:
                result = _counted_then_deleted(outcome.counted, outcome.done)
            else:
                result = outcome.done
            if record is not None and record.rows:
                record_failed = _upload_record(ctx, record)
    if result.paused is not None:
        log.warning("gc run %s: deleting stopped mid-pass: %s", ctx.run_id, result.paused)
    return _Swept(result, stopped, plan_key, record_failed)


def _upload_record(ctx: _RoundContext, record: DeletionRecord) -> str | None:
    """Write the round's deletion record; why not, in one line, when the
    store refused it. The deletions are done whatever happens here: the
    round still writes its summary, failed, naming the missing record (a
    round that raised here left no trace of what it had deleted)."""
    key = gc_run_deleted_key(ctx.root, ctx.run_id, 0)
    try:
        record.upload(ctx.store, key)
    except StorageError as err:
        log.warning(
            "gc run %s: its deletion record (%d keys) could not be written to %s: %s",
            ctx.run_id,
            record.rows,
            key,
            err,
        )
        return f"deletion record not written: {err}"
    return None


class _LocalPasses:
    """The local engine's passes (``round_protocol.GuardedPasses``): the
    round's sweeper over its shards, in this process."""

    def __init__(self, ctx: _RoundContext, shards: tuple[int, ...]) -> None:
        self._ctx = ctx
        self._shards = shards

    def count(self) -> SweepResult:
        return self._list_only(full_listing=True)

    def delete(self, counted: SweepResult | None) -> SweepResult:
        ctx = self._ctx
        return ctx.sweeper.sweep(
            self._shards,
            ctx.safe.safe_epoch,
            ctx.started_at,
            expected_deletes=None if counted is None else counted.eligible,
            stop=ctx.stop,
        )

    def plan(self) -> SweepResult:
        return self._list_only(full_listing=self._ctx.guarded, plan=True)

    def _list_only(self, *, full_listing: bool, plan: bool = False) -> SweepResult:
        """A pass that deletes nothing: to every shard's end
        (``full_listing``, what the guard counts against) or to ``M``."""
        ctx = self._ctx
        return ctx.sweeper.sweep(
            self._shards,
            ctx.safe.safe_epoch,
            ctx.started_at,
            dry_run=True,
            plan=plan,
            full_listing=full_listing,
            stop=ctx.stop,
        )

    def listed_and_eligible(self, result: SweepResult) -> tuple[int, int]:
        return result.listed, result.eligible


def _passes(ctx: _RoundContext, passes: _LocalPasses) -> PassesOutcome[SweepResult]:
    """The round's passes in the protocol's order (``run_guarded_passes``)."""
    return run_guarded_passes(
        passes,
        ctx.guard,
        dry_run=ctx.dry_run,
        guarded=ctx.guarded,
        max_delete_fraction=ctx.settings.max_delete_fraction,
        command="epochgc gc collect",
    )


def _counted_then_deleted(counted: SweepResult, deleted: SweepResult) -> SweepResult:
    """One result for a guarded round: what exists comes from the counting
    pass (it listed every shard to its end: listed, bytes, skips, what was
    eligible), what was done from the deleting pass; errors from both."""
    result = dataclasses.replace(counted)
    result.deleted = deleted.deleted
    result.bytes_deleted = deleted.bytes_deleted
    result.errors = counted.errors + deleted.errors
    result.error_samples = (counted.error_samples + deleted.error_samples)[:10]
    result.seconds = counted.seconds + deleted.seconds
    result.failed_shards = counted.failed_shards | deleted.failed_shards
    result.shards = {s: o for s, o in counted.shards.items() if s in deleted.shards}
    result.paused = deleted.paused
    return result


def _learn(
    ctx: _RoundContext, choice: ShardChoice, swept: _Swept, writer: str
) -> ShardKnowledge | None:
    """Step 4: fold the round's listings into the knowledge
    (``gc.listing.plan``) and write it when a shard was listed or the shard
    list changed. A round stopped by its guard, a pause or its ``stop``
    event learns nothing (its batches may not all have gone out), so its
    shards are listed again as if the round had not run. Returns the
    knowledge after the round."""
    result = swept.result
    if swept.stopped_by_guard is not None or result.paused is not None or ctx.is_stopping:
        return choice.knowledge
    learnt = learn_from_listings(
        choice,
        result.shards,
        result.failed_shards,
        safe_epoch=ctx.safe.safe_epoch,
        now=ctx.started_at,
        writer=writer,
    )
    if learnt is None:
        return choice.knowledge
    if choice.is_worth_saving:
        save_knowledge(ctx.store, ctx.root, learnt)
    return learnt


def _clean_up(
    ctx: _RoundContext, janitor: Janitor | None, swept: _Swept
) -> tuple[JanitorResult, str | None]:
    """Step 5: the janitor's pass after the sweep, unless there is no
    janitor, it is a dry run, or the guard stopped the round; held (and
    still due) when the sweep was paused or stopped, or when the pause
    (read now) says so; a pause read here or mid-pass (its store asks
    before each delete) leaves the pass incomplete, so the next round runs
    it again. Returns its result and the pause that stopped the round or
    held the janitor, if any."""
    paused = swept.result.paused
    if janitor is None or ctx.dry_run or swept.stopped_by_guard is not None:
        return JanitorResult(), paused
    if paused is not None or ctx.is_stopping:
        return JanitorResult(complete=False), paused  # not run: still due
    try:
        ctx.guard.check(DeletingJob.JANITOR)
        return janitor.run_once(ctx.controller.snapshot()), None
    except CollectorPausedError as err:
        log.info("janitor held: %s", err)
        return JanitorResult(complete=False), str(err)


def _summarise(
    ctx: _RoundContext,
    choice: ShardChoice,
    knowledge: ShardKnowledge | None,
    swept: _Swept,
    cleaned: JanitorResult,
    paused: str | None,
) -> CollectOutcome:
    """Step 6: write the run summary and say how the round went."""
    summary = _run_summary(ctx, choice, swept, cleaned, paused)
    key = write_summary(ctx.store, ctx.root, summary)
    never_deleted = unparseable_note(summary, choice.found.foreign if choice.found else ())
    if never_deleted is not None:
        log.warning("gc run %s: %s", ctx.run_id, never_deleted)
    log.debug(
        "gc run %s: listed %d, eligible %d, deleted %d (%d bytes), errors %d",
        ctx.run_id,
        summary.listed,
        summary.eligible,
        summary.deleted,
        summary.bytes_deleted,
        summary.errors,
    )
    result = swept.result
    return CollectOutcome(
        summary,
        key,
        swept.plan_key,
        swept.stopped_by_guard,
        ctx.safe,
        result.youngest_too_young,
        result.bytes_listed,
        choice.foreign_prefixes,
        knowledge,
        choice.next_listing_at,
        paused,
    )


def _run_summary(
    ctx: _RoundContext,
    choice: ShardChoice,
    swept: _Swept,
    cleaned: JanitorResult,
    paused: str | None,
) -> RunSummary:
    """The round's summary, with its requests and their modelled cost."""
    finished = ctx.finished_at()
    requests = _delta(ctx.requests_before, ctx.stats.by_operation())
    summary = RunSummary.of_sweep(
        ctx.run_id,
        "local",
        swept.result,
        controller_offset=ctx.safe.controller_offset,
        started_at=ctx.started_at,
        finished_at=finished,
        dry_run=ctx.dry_run,
        requests=requests,
    )
    prices = ctx.settings.prices
    return dataclasses.replace(
        summary,
        janitor=cleaned,
        cost_usd=prices.request_cost(requests),
        prices=prices,
        shards=_run_shards(choice),
        success=summary.success
        and swept.stopped_by_guard is None
        and paused is None
        and swept.record_failed is None,
        cause=f"{paused} (mid-run)" if paused is not None else swept.record_failed or summary.cause,
    )


def _run_shards(choice: ShardChoice) -> RunShards:
    """Which shards the round listed and why, for its summary."""
    present = None if choice.present is None else len(choice.present)
    shards = RunShards(present, len(choice.shards), choice.full_sweep, choice.why)
    plan = choice.plan
    if plan is None or plan.full_sweep:
        return shards
    return dataclasses.replace(
        shards,
        new=len(plan.new),
        due=len(plan.shards) - len(plan.new),
        not_due=plan.not_due,
        quiet=len(plan.quiet),
    )


def _delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {op: n - before.get(op, 0) for op, n in after.items() if n - before.get(op, 0) > 0}
