"""What a Spark task of ``epochgc gc spark`` runs on an executor. No pyspark
here: a task is a plain function of a picklable ``TaskSpec`` and its slice of
the work, and does its S3 work with boto3, like the in-process collector.

* Listing mode: a group of shards, swept by the same ``Sweeper`` as the
  local engine (one code path for the deletion rule and its limits).
* Inventory mode: one inventory data file, read with pyarrow, filtered by
  ``inventory_filter.select_eligible`` (vectorised), deleted in
  DeleteObjects batches of 1000. Keys already gone are not errors.

A task never raises for store trouble: it reports errors in its
``TaskResult``, so one bad data file or shard does not fail the job and
what the others did is still summed. A dry-run or counting task deletes
nothing; a dry run writes its part of the plan as
``{run}/plan/part-{task:05d}.parquet``.
"""

from __future__ import annotations

import io
import logging
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from epochgc.errors import EpochGCError
from epochgc.gc.eligibility import Verdict
from epochgc.gc.inventory_filter import select_eligible
from epochgc.gc.plan_file import PlanWriter
from epochgc.gc.sweeper import Sweeper, SweepPolicy, SweepResult
from epochgc.storage.client import ClientSettings, make_s3_client
from epochgc.storage.inventory import InventoryFile, InventoryManifest, read_data_file
from epochgc.storage.keys import gc_run_prefix
from epochgc.storage.object_store import MAX_KEYS_PER_DELETE, ObjectInfo
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.retry import RetryPolicy
from epochgc.storage.s3 import S3ObjectStore

log = logging.getLogger("epochgc.gc.spark.task")


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs, shipped to executors by pickling."""

    client: ClientSettings
    bucket: str
    root: str
    run_id: str
    safe_epoch: int
    now: datetime
    min_age: timedelta
    dry_run: bool
    count_only: bool = False
    """Plan and count without deleting or writing a plan (the delete-fraction
    guard's first pass)."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    delete_concurrency: int = 4
    shard_concurrency: int = 8
    inventory_bucket: str = ""
    manifest: InventoryManifest | None = None
    client_hook: Callable[[Any], None] | None = None
    """Called with each task's new boto3 client (benchmarks add latency,
    fault-injection runs add faults); must pickle."""


@dataclass
class TaskResult:
    """What one task saw and did (summed by the driver)."""

    task: int
    listed: int = 0
    eligible: int = 0
    deleted: int = 0
    bytes_deleted: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    plan_key: str | None = None


def _open_store(spec: TaskSpec, bucket: str) -> tuple[S3ObjectStore, RequestStats]:
    client = make_s3_client(spec.client)
    if spec.client_hook is not None:
        spec.client_hook(client)
    stats = RequestStats()
    stats.attach(client)
    store = S3ObjectStore(
        client, bucket, retry_policy=spec.retry, delete_concurrency=spec.delete_concurrency
    )
    return store, stats


def listing_task(spec: TaskSpec, task: int, shards: list[int]) -> TaskResult:
    """Sweep ``shards`` (delete, plan, or only count)."""
    _worker_logging()
    started = time.perf_counter()
    store, stats = _open_store(spec, spec.bucket)
    sweeper = _sweeper(store, spec)
    planning = spec.dry_run or spec.count_only
    plan_key = f"{gc_run_prefix(spec.root, spec.run_id)}plan/part-{task:05d}.parquet"
    with PlanWriter(with_last_modified=False) as plan:
        sweep = sweeper.sweep(
            shards,
            spec.safe_epoch,
            spec.now,
            dry_run=planning,
            full_listing=spec.count_only,
            plan_sink=plan.add if spec.dry_run and not spec.count_only else None,
        )
        result = _result_of_sweep(task, sweep)
        if spec.dry_run and not spec.count_only:
            try:
                result.plan_key = plan.upload(store, plan_key)
            except EpochGCError as err:
                result.errors += 1
                result.error_samples.append(f"{plan_key}: {err}")
    return _finish(result, stats, started, f"shards {shards[0]}..{shards[-1]}")


def _result_of_sweep(task: int, sweep: SweepResult) -> TaskResult:
    return TaskResult(
        task,
        listed=sweep.listed,
        eligible=sweep.eligible,
        deleted=sweep.deleted,
        bytes_deleted=sweep.bytes_deleted,
        skipped={v.value: n for v, n in sweep.skipped.items()},
        errors=sweep.errors,
        error_samples=list(sweep.error_samples),
    )


def inventory_task(spec: TaskSpec, task: int, entry: InventoryFile) -> TaskResult:
    """Filter one inventory data file and delete what it allows."""
    _worker_logging()
    started = time.perf_counter()
    store, stats = _open_store(spec, spec.bucket)
    result = TaskResult(task)
    assert spec.manifest is not None, "inventory mode ships the manifest"
    try:
        source, _ = (
            (store, stats)
            if spec.inventory_bucket in ("", spec.bucket)
            else _open_store(spec, spec.inventory_bucket)
        )
        rows = read_data_file(source.get(entry.key).body, spec.manifest, entry)
    except EpochGCError as err:
        result.errors += 1
        result.error_samples.append(f"{entry.key}: {err}")
        return _finish(result, stats, started, entry.key)
    selection = select_eligible(
        rows, root=spec.root, safe_epoch=spec.safe_epoch, now=spec.now, min_age=spec.min_age
    )
    result.listed = selection.listed
    result.eligible = selection.eligible.num_rows
    result.skipped = {v.value: n for v, n in selection.skipped.items() if n}
    if spec.count_only:
        pass
    elif spec.dry_run:
        result.plan_key = _write_plan_part(store, spec, task, selection.eligible, result)
    else:
        _delete_selection(store, spec, selection.eligible, result)
    return _finish(result, stats, started, entry.key)


def _delete_selection(
    store: S3ObjectStore, spec: TaskSpec, eligible: pa.Table, result: TaskResult
) -> None:
    """Delete through the sweeper's own delete path (batches of 1000,
    several in flight, AIMD on SlowDown, per-key errors counted), feeding
    it one Arrow record batch at a time rather than a list of every row."""

    def rows() -> Iterator[ObjectInfo]:
        for batch in eligible.to_batches(max_chunksize=MAX_KEYS_PER_DELETE):
            keys = batch.column("key").to_pylist()
            sizes = batch.column("size").to_pylist()
            for key, size in zip(keys, sizes, strict=True):
                yield ObjectInfo(key, size or 0, "", spec.now)

    done = _sweeper(store, spec).delete_objects(rows(), spec.safe_epoch)
    result.deleted = done.deleted
    result.bytes_deleted = done.bytes_deleted
    result.errors += done.errors
    result.error_samples += done.error_samples


def _sweeper(store: S3ObjectStore, spec: TaskSpec) -> Sweeper:
    return Sweeper(
        store,
        spec.root,
        SweepPolicy(
            min_object_age=spec.min_age,
            shard_concurrency=spec.shard_concurrency,
            delete_concurrency=spec.delete_concurrency,
        ),
    )


def _write_plan_part(
    store: S3ObjectStore, spec: TaskSpec, task: int, plan: pa.Table, result: TaskResult
) -> str | None:
    key = f"{gc_run_prefix(spec.root, spec.run_id)}plan/part-{task:05d}.parquet"
    sink = io.BytesIO()
    pq.write_table(plan, sink)
    try:
        store.put(key, sink.getvalue())
    except EpochGCError as err:
        result.errors += 1
        result.error_samples.append(f"{key}: {err}")
        return None
    return key


def _finish(result: TaskResult, stats: RequestStats, started: float, what: str) -> TaskResult:
    result.requests = stats.by_operation()
    result.seconds = time.perf_counter() - started
    rate = result.deleted / result.seconds if result.seconds > 0 else 0.0
    log.info(
        "spark task %d (%s): listed %d, eligible %d, deleted %d in %.1fs (%.0f keys/s), errors %d",
        result.task,
        what,
        result.listed,
        result.eligible,
        result.deleted,
        result.seconds,
        rate,
        result.errors,
    )
    return result


def _worker_logging() -> None:
    """Executors' Python workers start with no logging set up; send our
    task lines to stderr (the executor log) once per worker."""
    logger = logging.getLogger("epochgc")
    if not any(getattr(h, "_epochgc_task", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
        handler._epochgc_task = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def sum_skipped(results: list[TaskResult]) -> dict[Verdict, int]:
    """Skip counts of all tasks, by verdict."""
    totals: dict[Verdict, int] = {}
    for r in results:
        for name, count in r.skipped.items():
            verdict = Verdict(name)
            totals[verdict] = totals.get(verdict, 0) + count
    return totals
