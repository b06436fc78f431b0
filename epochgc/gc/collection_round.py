"""One collection round with the local engine: ``epochgc gc collect``.

1. Compute ``M`` lazily (controller tail + one report per node). Untrusted
   inputs: no deletion, ``SafetyBlockedError``.
2. Find the shards: every shard present in the bucket (a delimiter listing
   of ``{root}/l0/``, ``gc.listing.shards``), not ``0..layout.l0_shards-1``. With a
   listing policy (``CollectSettings.listing``, on in the product), the
   round lists only the shards the cost-aware schedule picks
   (``gc.listing.schedule``) from the shard knowledge, and runs the
   delimiter listing only when it lists something or its list of shards
   is stale; afterwards it writes what it learnt (``{root}/gc/shards/state``).
   Times in the knowledge are another collector's clock: one ahead of ours
   by more than ``clock_skew_margin_seconds`` is unknown (that shard is
   listed, the full sweep or discovery is due; ``shard_knowledge.
   trust_knowledge``), logged once per writer and never written back.
   A dry run and ``all_shards`` list every shard.
3. Unless it is a dry run, read ``{root}/gc/control.json`` (through the
   ``gc.pause`` guard): paused means no deletion, ``CollectorPausedError``
   (``paused by WHO: REASON``). ``force`` never overrides a pause.
4. With the delete-fraction guard on (``max_delete_fraction < 1``) and no
   ``force``, a counting pass lists every shard to its end and counts what
   it sees (objects, bytes, what is eligible), keeping no key. A round that
   would delete more than the allowed share of what it listed stops there,
   deleting nothing. Otherwise the control document is read again (a pause
   may have come during the count) and a deleting pass streams.
5. The deleting pass (also the whole round with the guard off or forced)
   streams: list, delete, stop each shard at its first key above ``M``.
   Memory is bounded by the batches in flight, whatever the bucket holds.
   Its store asks the pause before every DeleteObjects (``GuardedStore``):
   a pause that lands mid-pass stops it before its next batch, the round
   ends with ``CollectOutcome.paused`` and its summary says so.
5b. The janitor, when the caller passes one, runs only if the round was
   not stopped or paused, after the pause is read once more.
6. ``--dry-run`` deletes nothing and streams the plan (key, size,
   last_modified) into a Parquet file beside the summary.
7. Every run writes ``{root}/gc/runs/{run_id}/summary.json``, with its
   requests and their modelled cost (``gc.cost``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from epochgc.errors import EpochGCError
from epochgc.gc.control import CollectorPausedError, DeletingJob
from epochgc.gc.cost import Prices
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.janitor import Janitor, JanitorResult
from epochgc.gc.listing.knowledge import ShardKnowledge, trust_knowledge
from epochgc.gc.listing.schedule import (
    ListingPlan,
    ListingPolicy,
    learn,
    needs_discovery,
    plan_listing,
)
from epochgc.gc.listing.shards import ShardListing, discover_shards, load_knowledge, save_knowledge
from epochgc.gc.pause import GuardedStore, PauseGuard
from epochgc.gc.plan_file import PlanWriter
from epochgc.gc.run_report import RunShards, RunSummary, new_run_id, write_summary
from epochgc.gc.sweeper import Sweeper, SweepPolicy, SweepResult
from epochgc.storage.keys import gc_run_prefix
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.stored_time import DEFAULT_MARGIN_SECONDS
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import SafeEpoch, SafeEpochTracker
from epochgc.watermarks.safe_epoch.compute import compute_safe_epoch

log = logging.getLogger("epochgc.gc.collect")


class SafetyBlockedError(EpochGCError):
    """``M`` could not be computed from trusted inputs; nothing was deleted."""


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


def guard_message(eligible: int, listed: int, max_fraction: float, command: str) -> str | None:
    """Why the delete-fraction guard stops a round, or ``None`` when the
    share is within ``max_fraction``. Pure.

    The message names the one flag that bypasses the guard and nothing
    else (``--force`` no longer unlocks anything more)."""
    fraction = eligible / listed if listed else 0.0
    if not eligible or fraction <= max_fraction:
        return None
    return (
        f"would delete {eligible} of {listed} listed L0 objects ({fraction:.1%} > "
        f"max_delete_fraction {max_fraction:.0%}); nothing deleted; if that share is "
        f"expected, run `{command} --force` once (it bypasses only this guard)"
    )


def untrusted_inputs_message(tracker: SafeEpochTracker) -> str:
    """The one line of a round or job blocked on untrusted ``M`` inputs: it
    names the input (the tracker's last error), so the operator knows what
    to fix before ``gc reset``. ``gc collect`` and ``gc spark`` share it."""
    return f"untrusted M inputs ({tracker.last_error}); nothing deleted"


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
    stop: threading.Event | None = None,
    controller: Controller | None = None,
    janitor: Janitor | None = None,
    knowledge: ShardKnowledge | None = None,
    all_shards: bool = False,
    guard: PauseGuard | None = None,
    writer: str = "",
    future_log: FutureTimeLog | None = None,
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
    guard (``GuardedStore``).
    ``writer`` names this collector in the knowledge it writes; times from
    the future it reads go to ``future_log`` (a fresh one when omitted).

    Raises:
        SafetyBlockedError: ``M`` could not be computed from trusted inputs.
        CollectorPausedError: the collector is paused (not for a dry run).
        StorageError: the shards could not be listed.
    """
    started = now or datetime.now(UTC)
    clock_started = time.monotonic()
    run_id = new_run_id(started)
    before = stats.by_operation()
    tracker = tracker or SafeEpochTracker(blocked_after=1)
    controller = controller or Controller(store, root)
    safe = compute_safe_epoch(controller, store, root, tracker)
    if safe is None:
        raise SafetyBlockedError(untrusted_inputs_message(tracker))
    guard = guard or PauseGuard(store, root)
    sweeper = Sweeper(
        GuardedStore(store, guard, DeletingJob.L0),
        root,
        SweepPolicy(
            min_object_age=settings.min_object_age,
            shard_concurrency=settings.shard_concurrency,
            delete_concurrency=settings.delete_concurrency,
            rate_limit_keys_per_second=settings.rate_limit_keys_per_second,
        ),
    )
    policy = None if dry_run else settings.listing
    knowledge = _trusted_knowledge(
        store, root, policy, knowledge, started, settings.clock_skew_margin_seconds, future_log
    )
    choice = _choose_shards(
        store, root, policy, knowledge, safe.safe_epoch, started, all_shards=all_shards
    )
    found, listing, shards = choice.found, choice.plan, choice.shards
    guard_on = settings.max_delete_fraction < 1.0 and not force
    stopped: str | None = None
    plan_key: str | None = None
    log.debug(
        "gc run %s: M=%d (controller offset %d), %d shards",
        run_id,
        safe.safe_epoch,
        safe.controller_offset,
        len(shards),
    )
    if dry_run:
        with PlanWriter(with_last_modified=True) as plan:
            result = sweeper.sweep(
                shards,
                safe.safe_epoch,
                started,
                dry_run=True,
                full_listing=guard_on,
                plan_sink=plan.add,
                stop=stop,
            )
            plan_key = plan.upload(store, f"{gc_run_prefix(root, run_id)}plan.parquet")
        if guard_on:
            stopped = guard_message(
                result.eligible, result.listed, settings.max_delete_fraction, "epochgc gc collect"
            )
    elif guard_on:
        result, stopped = _count_then_delete(
            sweeper, guard, shards, safe.safe_epoch, started, settings.max_delete_fraction, stop
        )
        if stopped is not None:
            log.warning("gc run %s stopped: %s", run_id, stopped)
    else:
        guard.check(DeletingJob.L0)
        result = sweeper.sweep(shards, safe.safe_epoch, started, stop=stop)
    paused = result.paused
    if paused is not None:
        log.warning("gc run %s: deleting stopped mid-pass: %s", run_id, paused)
    if listing is not None and knowledge is not None and stopped is None and paused is None:
        knowledge = _learn_and_save(
            store,
            root,
            knowledge,
            listing,
            result,
            found.shards if choice.discovered else None,
            safe.safe_epoch,
            started,
            stop,
            writer,
        )
    cleaned = JanitorResult()
    if janitor is not None and not dry_run and stopped is None:
        cleaned, paused = _janitor_pass(janitor, controller, guard, paused, stop)
    finished = (
        datetime.now(UTC)
        if now is None
        else started + timedelta(seconds=time.monotonic() - clock_started)
    )
    requests = _delta(before, stats.by_operation())
    summary = RunSummary.of_sweep(
        run_id,
        "local",
        result,
        controller_offset=safe.controller_offset,
        started_at=started,
        finished_at=finished,
        dry_run=dry_run,
        requests=requests,
    )
    summary = dataclasses.replace(
        summary,
        janitor=cleaned,
        cost_usd=settings.prices.request_cost(requests),
        prices=settings.prices,
        shards=choice.run_shards(),
        success=summary.success and stopped is None and paused is None,
        cause=f"{paused} (mid-run)" if paused is not None else summary.cause,
    )
    key = write_summary(store, root, summary)
    log.debug(
        "gc run %s: listed %d, eligible %d, deleted %d (%d bytes), errors %d",
        run_id,
        summary.listed,
        summary.eligible,
        summary.deleted,
        summary.bytes_deleted,
        summary.errors,
    )
    return CollectOutcome(
        summary,
        key,
        plan_key,
        stopped,
        safe,
        result.youngest_too_young,
        result.bytes_listed,
        len(found.foreign),
        knowledge,
        listing.next_due_at if listing is not None else None,
        paused,
    )


def _janitor_pass(
    janitor: Janitor,
    controller: Controller,
    guard: PauseGuard,
    paused: str | None,
    stop: threading.Event | None,
) -> tuple[JanitorResult, str | None]:
    """The janitor's pass after the sweep, unless the sweep was paused or
    stopped, and only if the pause (read now) allows; a pause read here or
    mid-pass (its store asks before each delete) leaves the pass
    incomplete, so the next round runs it again. Returns its result and
    the pause that held it, if any."""
    if paused is not None or (stop is not None and stop.is_set()):
        return JanitorResult(complete=False), paused  # not run: still due
    try:
        guard.check(DeletingJob.JANITOR)
        return janitor.run_once(controller.snapshot()), None
    except CollectorPausedError as err:
        log.info("janitor held: %s", err)
        return JanitorResult(complete=False), str(err)


def _trusted_knowledge(
    store: ObjectStore,
    root: str,
    policy: ListingPolicy | None,
    knowledge: ShardKnowledge | None,
    now: datetime,
    margin_seconds: float,
    future_log: FutureTimeLog | None,
) -> ShardKnowledge | None:
    """The knowledge a round plans from: read from the bucket when the
    caller has none, then through the stored-time rule, even when the
    caller kept it (its own clock may have been stepped back since)."""
    if policy is not None and knowledge is None:
        knowledge = load_knowledge(store, root)
    if knowledge is None:
        return None
    trusted, future = trust_knowledge(knowledge, now, margin_seconds)
    (future_log or FutureTimeLog()).note(future)
    return trusted


@dataclass(frozen=True)
class _ShardChoice:
    found: ShardListing
    discovered: bool
    plan: ListingPlan | None
    shards: tuple[int, ...]

    def run_shards(self) -> RunShards:
        """What the run summary says about the shards."""
        return RunShards(
            present=len(self.found.shards) if self.discovered else None,
            listed=len(self.shards),
            full_sweep=self.plan is None or self.plan.full_sweep,
        )


def _choose_shards(
    store: ObjectStore,
    root: str,
    policy: ListingPolicy | None,
    knowledge: ShardKnowledge | None,
    safe_epoch: int,
    now: datetime,
    *,
    all_shards: bool = False,
) -> _ShardChoice:
    """The shards a round lists: every shard present without a policy or
    with ``all_shards`` (a full sweep the knowledge learns from);
    otherwise those the schedule picks, running the delimiter listing only
    when something is due among the known shards or the shard list is stale."""
    if policy is None or knowledge is None:
        found = discover_shards(store, root)
        return _ShardChoice(found, True, None, found.shards)
    if all_shards:
        found = discover_shards(store, root)
        return _ShardChoice(found, True, ListingPlan(found.shards, True, (), None), found.shards)
    plan = plan_listing(knowledge, knowledge.shards, safe_epoch=safe_epoch, now=now, policy=policy)
    if not (plan.shards or plan.full_sweep or needs_discovery(knowledge, now, policy)):
        return _ShardChoice(ShardListing(()), False, plan, plan.shards)
    found = discover_shards(store, root)
    plan = plan_listing(knowledge, found.shards, safe_epoch=safe_epoch, now=now, policy=policy)
    return _ShardChoice(found, True, plan, plan.shards)


def _learn_and_save(
    store: ObjectStore,
    root: str,
    knowledge: ShardKnowledge,
    plan: ListingPlan,
    result: SweepResult,
    present: tuple[int, ...] | None,
    safe_epoch: int,
    now: datetime,
    stop: threading.Event | None,
    writer: str,
) -> ShardKnowledge:
    """Fold the round's listings into the knowledge and write it when a
    shard was listed or the shard list changed. A stopped round learns
    nothing (its batches may not all have gone out), so its shards are
    listed again as if the round had not run."""
    if stop is not None and stop.is_set():
        return knowledge
    updated = learn(
        knowledge,
        plan,
        result.shards,
        result.failed_shards,
        safe_epoch=safe_epoch,
        now=now,
        present=present,
        writer=writer,
    )
    if plan.shards or present is not None:
        save_knowledge(store, root, updated)
    return updated


def _count_then_delete(
    sweeper: Sweeper,
    guard: PauseGuard,
    shards: tuple[int, ...],
    safe_epoch: int,
    started: datetime,
    max_fraction: float,
    stop: threading.Event | None,
) -> tuple[SweepResult, str | None]:
    """A guarded round: a counting pass, then (within ``max_fraction``) a
    deleting pass; the pause is read before each. Returns the result and
    the guard's message when it stopped the round."""
    guard.check(DeletingJob.L0)
    counted = sweeper.sweep(shards, safe_epoch, started, dry_run=True, full_listing=True, stop=stop)
    stopped = guard_message(counted.eligible, counted.listed, max_fraction, "epochgc gc collect")
    if stopped is not None:
        return counted, stopped
    guard.check(DeletingJob.L0)  # a pause may have come during the count
    deleted = sweeper.sweep(
        shards, safe_epoch, started, expected_deletes=counted.eligible, stop=stop
    )
    return _counted_then_deleted(counted, deleted), None


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


def _delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {op: n - before.get(op, 0) for op, n in after.items() if n - before.get(op, 0) > 0}
