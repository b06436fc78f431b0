"""One collection round with the local engine: ``epochgc gc collect``.

1. Compute ``M`` lazily (controller tail + one report per node). Untrusted
   inputs: no deletion, ``SafetyBlockedError``.
2. With the delete-fraction guard on (``max_delete_fraction < 1``) and no
   ``force``, plan first over a full listing (objects above ``M`` counted,
   never planned); a plan that would delete more than the allowed share of
   what it listed stops here, deleting nothing. Otherwise delete the plan
   without listing again (still safe: ``M`` only grows, objects only age).
3. With the guard off (or forced), stream: list, delete, stop each shard at
   its first key above ``M``.
4. ``--dry-run`` deletes nothing and writes the plan (key, size,
   last_modified) as Parquet beside the summary.
5. Every run writes ``{root}/gc/runs/{run_id}/summary.json``.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from epochgc.errors import EpochGCError
from epochgc.gc.janitor import Janitor, JanitorResult
from epochgc.gc.run_report import RunSummary, new_run_id, write_summary
from epochgc.gc.sweeper import Sweeper, SweepPolicy, SweepResult
from epochgc.storage.keys import gc_run_prefix
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.aggregate import SafeEpoch, SafeEpochTracker
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch import compute_safe_epoch

log = logging.getLogger("epochgc.gc.collect")


class SafetyBlockedError(EpochGCError):
    """``M`` could not be computed from trusted inputs; nothing was deleted."""


@dataclass(frozen=True)
class CollectSettings:
    """What a round needs from ``[gc]`` and ``[layout]``."""

    shards: int
    min_object_age: timedelta
    max_delete_fraction: float
    shard_concurrency: int = 8
    delete_concurrency: int = 4
    rate_limit_keys_per_second: float | None = None


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
) -> CollectOutcome:
    """Run one round (see the module docstring).

    A long-lived caller passes its ``controller`` so each round reads only
    the controller log's new entries. The GC leader passes a ``janitor``
    when one is due: after the sweep (not in a dry run, nor when the guard
    stopped the round) it removes what deleted topic incarnations left, as
    judged against the controller view at that moment. A set ``stop`` event ends the round
    after the DeleteObjects batches in flight; the summary then says what
    was done (the next round finishes the job: nothing is lost).

    Raises:
        SafetyBlockedError: ``M`` could not be computed from trusted inputs.
    """
    started = now or datetime.now(UTC)
    run_id = new_run_id(started)
    before = stats.by_operation()
    tracker = tracker or SafeEpochTracker(blocked_after=1)
    controller = controller or Controller(store, root)
    safe = compute_safe_epoch(controller, store, root, tracker)
    if safe is None:
        raise SafetyBlockedError(f"untrusted M inputs ({tracker.last_error}); nothing deleted")
    sweeper = Sweeper(
        store,
        root,
        SweepPolicy(
            min_object_age=settings.min_object_age,
            shard_concurrency=settings.shard_concurrency,
            delete_concurrency=settings.delete_concurrency,
            rate_limit_keys_per_second=settings.rate_limit_keys_per_second,
        ),
    )
    shards = range(settings.shards)
    guard_on = settings.max_delete_fraction < 1.0 and not force
    stopped: str | None = None
    plan_key: str | None = None
    log.debug(
        "gc run %s: M=%d (controller offset %d)", run_id, safe.safe_epoch, safe.controller_offset
    )
    if dry_run or guard_on:
        result = sweeper.sweep(
            shards, safe.safe_epoch, started, dry_run=True, full_listing=guard_on, stop=stop
        )
        fraction = result.eligible / result.listed if result.listed else 0.0
        if guard_on and result.eligible and fraction > settings.max_delete_fraction:
            stopped = (
                f"would delete {result.eligible} of {result.listed} listed L0 objects "
                f"({fraction:.1%} > max_delete_fraction {settings.max_delete_fraction:.0%}); "
                "nothing deleted; rerun with --force if that is expected"
            )
            log.warning("gc run %s stopped: %s", run_id, stopped)
        if dry_run:
            plan_key = _write_plan(store, root, run_id, result)
        elif stopped is None:
            result = sweeper.delete_planned(result, stop=stop)
    else:
        result = sweeper.sweep(shards, safe.safe_epoch, started, stop=stop)
    cleaned = JanitorResult()
    if janitor is not None and not dry_run and stopped is None:
        cleaned = janitor.run_once(controller.snapshot())
    finished = datetime.now(UTC)
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
    summary = dataclasses.replace(summary, janitor=cleaned)
    if stopped is not None:
        summary = dataclasses.replace(summary, success=False)
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
        summary, key, plan_key, stopped, safe, result.youngest_too_young, result.bytes_listed
    )


def _write_plan(store: ObjectStore, root: str, run_id: str, result: SweepResult) -> str:
    # Imported here: only dry runs write a plan, and pyarrow (with its
    # allocator's background thread) has no business in every daemon.
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    table = pa.table(
        {
            "key": pa.array([o.key for o in result.plan], pa.string()),
            "size": pa.array([o.size for o in result.plan], pa.int64()),
            "last_modified": pa.array(
                [o.last_modified for o in result.plan], pa.timestamp("ms", tz="UTC")
            ),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    key = f"{gc_run_prefix(root, run_id)}plan.parquet"
    store.put(key, sink.getvalue())
    return key


def _delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {op: n - before.get(op, 0) for op, n in after.items() if n - before.get(op, 0) > 0}
