"""The Spark deletion job: ``epochgc gc spark`` (and ``spark-submit
scripts/spark_gc.py``).

The driver computes ``M`` (or takes ``--max-epoch``: above the computed
``M`` only with ``--allow-max-epoch-above-m``, never above the controller
offset), builds the plan (listing mode: every shard present in the bucket,
found by a delimiter listing, dealt into groups; inventory mode: the data
files of the newest verified manifest), and runs one Spark task per group
or file (``spark_tasks``), with job and stage descriptions that say what
they do in the Spark UI. With the delete-fraction guard on (and no
``--force``, which bypasses that guard and nothing else), a first job only
counts; the deleting job runs only if the share is within
``gc.max_delete_fraction``. Unless it is a dry run, the driver reads the
control document before any deleting job and again between the counting
and the deleting job: a paused collector (``gc pause``) stops the job with
``CollectorPausedError`` before anything is deleted. The driver sums the
tasks' results into the run report
(``{root}/gc/runs/{run_id}/summary.json``) and, when
``metrics.pushgateway`` is set, pushes the run's figures.

Why an inventory may be days old and still safe: it only proposes keys;
each is deleted only if its epoch is ``<= M`` computed now (``M`` never
decreases) and it was older than ``min_object_age`` when listed. Objects
written after the inventory are not in it and stay; objects already gone
come back from DeleteObjects as deleted.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from epochgc.config import Config
from epochgc.errors import InvalidArgumentError
from epochgc.gc.collect import SafetyBlockedError, guard_message, untrusted_inputs_message
from epochgc.gc.control import ensure_not_paused
from epochgc.gc.eligibility import Verdict
from epochgc.gc.run_report import RunSummary, new_run_id, run_figures, write_summary
from epochgc.gc.shards import discover_shards
from epochgc.gc.spark_credentials import hand_over, without_secrets
from epochgc.gc.spark_tasks import TaskResult, TaskSpec, inventory_task, listing_task, sum_skipped
from epochgc.gc.sweeper import SweepResult
from epochgc.metrics.push import push_run
from epochgc.storage.client import ClientSettings
from epochgc.storage.inventory import (
    InventoryLocation,
    InventoryManifest,
    find_newest_manifest,
    load_manifest,
)
from epochgc.storage.keys import gc_run_prefix
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.retry import RetryPolicy
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.aggregate import SafeEpochTracker
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch import compute_safe_epoch

log = logging.getLogger("epochgc.gc.spark")

MODES = ("listing", "inventory")
MAX_LISTING_TASKS = 1000


@dataclass(frozen=True)
class SparkRunOptions:
    """What ``gc spark`` was asked to do."""

    mode: str = "listing"
    dry_run: bool = False
    force: bool = False
    """Bypass the delete-fraction guard (only that)."""
    max_epoch: int | None = None
    allow_above_m: bool = False
    """Accept a ``max_epoch`` above the computed ``M`` (never above the
    controller offset)."""
    listing_tasks: int = 0


@dataclass(frozen=True)
class SparkOutcome:
    """A finished job."""

    summary: RunSummary
    summary_key: str
    plan_prefix: str | None
    stopped_by_guard: str | None
    manifest_key: str | None
    tasks: int


def choose_safe_epoch(
    computed: int, controller_offset: int, requested: int | None, *, allow_above_m: bool
) -> int:
    """The ``M`` the job uses. Pure.

    Why a flag of its own: deleting above the computed ``M`` deletes
    objects a partition may still need, which is a different decision from
    "this large a share is expected" (``--force``). An operator told by the
    guard to rerun with ``--force`` must not unlock it by accident.

    Raises:
        InvalidArgumentError: ``requested`` above the computed ``M`` without
            ``allow_above_m``, or above the controller offset at all (no
            object of a later epoch can be known to be unneeded), or
            negative.
    """
    if requested is None:
        return computed
    if requested < 0:
        raise InvalidArgumentError(f"--max-epoch must be >= 0, got {requested}")
    if requested > controller_offset:
        raise InvalidArgumentError(
            f"--max-epoch {requested} is above the cluster epoch {controller_offset}: refused "
            "whatever the flags"
        )
    if requested > computed and not allow_above_m:
        raise InvalidArgumentError(
            f"--max-epoch {requested} is above the computed M={computed}: objects above M may "
            "still be needed; refused (--allow-max-epoch-above-m overrides, at your own risk; "
            "--force does not)"
        )
    return requested


def shard_groups(shards: Sequence[int], tasks: int) -> list[list[int]]:
    """Shards dealt into at most ``tasks`` contiguous groups (the last ones
    smaller; ``0``: one per shard), no group empty. Pure."""
    count = len(shards)
    if count == 0:
        return []
    tasks = max(1, min(tasks or count, count, MAX_LISTING_TASKS))
    size = -(-count // tasks)
    return [list(shards[start : start + size]) for start in range(0, count, size)]


def run_spark_gc(
    spark: Any,
    config: Config,
    store: ObjectStore,
    stats: RequestStats,
    client: ClientSettings,
    options: SparkRunOptions,
    *,
    now: datetime | None = None,
    client_hook: Callable[[Any], None] | None = None,
) -> SparkOutcome:
    """Run the job (see the module docstring). ``client_hook`` is applied to
    every task's boto3 client (benchmarks and fault injection).

    Raises:
        SafetyBlockedError: ``M`` cannot be computed from trusted inputs.
        CollectorPausedError: the collector is paused (not for a dry run),
            before the first deleting job or between counting and deleting.
        InvalidArgumentError: a bad ``--max-epoch`` or mode.
        InventoryError: no trustworthy manifest (inventory mode).
    """
    if options.mode not in MODES:
        raise InvalidArgumentError(f"mode must be one of {MODES}, got {options.mode!r}")
    started = now or datetime.now(UTC)
    clock = time.perf_counter()
    root = config.layout.root
    run_id = new_run_id(started)
    tracker = SafeEpochTracker(blocked_after=1)
    safe = compute_safe_epoch(Controller(store, root), store, root, tracker)
    if safe is None:
        raise SafetyBlockedError(untrusted_inputs_message(tracker))
    safe_epoch = choose_safe_epoch(
        safe.safe_epoch,
        safe.controller_offset,
        options.max_epoch,
        allow_above_m=options.allow_above_m,
    )
    if not options.dry_run:
        ensure_not_paused(store, root)
    engine = f"spark-{options.mode}"
    # The tasks carry no secret: the executors' environment does (spark_credentials).
    hand_over(spark, client, config.spark.credentials)
    spec = TaskSpec(
        client=without_secrets(client),
        bucket=config.store.bucket,
        root=root,
        run_id=run_id,
        safe_epoch=safe_epoch,
        now=started,
        min_age=timedelta(seconds=config.gc.min_object_age_seconds),
        dry_run=options.dry_run,
        retry=RetryPolicy(
            max_attempts=config.store.max_attempts,
            base_delay_seconds=config.store.base_backoff_seconds,
            max_delay_seconds=config.store.max_backoff_seconds,
        ),
        delete_concurrency=config.gc.delete_concurrency,
        shard_concurrency=config.gc.shard_concurrency,
        client_hook=client_hook,
    )
    manifest_key: str | None = None
    if options.mode == "inventory":
        location = inventory_location(config)
        inventory_store = (
            store
            if location.bucket == config.store.bucket or not isinstance(store, S3ObjectStore)
            else S3ObjectStore(store.client, location.bucket)
        )
        manifest_key = find_newest_manifest(inventory_store, location)
        manifest = load_manifest(inventory_store, manifest_key)
        _check_source(manifest, config.store.bucket)
        spec = dataclasses.replace(spec, inventory_bucket=location.bucket, manifest=manifest)
        log.info(
            "inventory %s: %s, %d data files, created %s",
            manifest_key,
            manifest.file_format,
            len(manifest.files),
            manifest.created_at.isoformat(),
        )
    shards = () if options.mode == "inventory" else discover_shards(store, root).shards
    run = _JobRunner(spark, spec, options, shards)
    log.info(
        "gc spark %s (%s%s): M=%d (computed %d, controller offset %d), %d tasks",
        run_id,
        engine,
        ", dry run" if options.dry_run else "",
        safe_epoch,
        safe.safe_epoch,
        safe.controller_offset,
        run.task_count,
    )
    guard_on = config.gc.max_delete_fraction < 1.0 and not options.force and not options.dry_run
    stopped: str | None = None
    if guard_on:
        counted = run.run(dataclasses.replace(spec, count_only=True), "count what would go")
        stopped = guard_message(
            sum(r.eligible for r in counted),
            sum(r.listed for r in counted),
            config.gc.max_delete_fraction,
            "epochgc gc spark",
        )
        if stopped is not None:
            log.warning("gc spark %s stopped: %s", run_id, stopped)
            results = counted
        else:
            ensure_not_paused(store, root)  # a pause may have come during the count
    if stopped is None:
        verb = "plan (dry run)" if options.dry_run else "delete"
        results = run.run(spec, verb)
    summary = summarise(
        results,
        run_id=run_id,
        engine=engine,
        safe_epoch=safe_epoch,
        controller_offset=safe.controller_offset,
        started_at=started,
        dry_run=options.dry_run,
        driver_requests=stats.by_operation(),
        stopped=stopped is not None,
    )
    key = write_summary(store, root, summary)
    seconds = time.perf_counter() - clock
    log.info(
        "gc spark %s done in %.1fs: listed %d, eligible %d, deleted %d (%d bytes), errors %d",
        run_id,
        seconds,
        summary.listed,
        summary.eligible,
        summary.deleted,
        summary.bytes_deleted,
        summary.errors,
    )
    for sample in [s for r in results for s in r.error_samples][:10]:
        log.warning("gc spark %s error: %s", run_id, sample)
    if config.metrics.pushgateway:
        push_run(config.metrics.pushgateway, engine, run_figures(summary, seconds), summary.skipped)
    plan_prefix = f"{gc_run_prefix(root, run_id)}plan/" if options.dry_run else None
    return SparkOutcome(summary, key, plan_prefix, stopped, manifest_key, run.task_count)


def inventory_location(config: Config) -> InventoryLocation:
    """Where ``[inventory]`` says the reports are."""
    inv = config.inventory
    return InventoryLocation(
        bucket=inv.bucket or config.store.bucket,
        prefix=inv.prefix,
        source_bucket=inv.source_bucket or config.store.bucket,
        config_id=inv.config_id,
    )


def _check_source(manifest: InventoryManifest, bucket: str) -> None:
    if manifest.source_bucket != bucket:
        raise InvalidArgumentError(
            f"{manifest.key} inventories bucket {manifest.source_bucket!r}, but this job "
            f"deletes in {bucket!r}; refusing to act on another bucket's inventory"
        )


class _JobRunner:
    """Runs one Spark job over the plan's units (shard groups or files)."""

    def __init__(
        self, spark: Any, spec: TaskSpec, options: SparkRunOptions, shards: Sequence[int]
    ) -> None:
        self._spark = spark
        self._options = options
        if spec.manifest is not None:
            self._units: Sequence[Any] = list(spec.manifest.files)
            self._task: Callable[[TaskSpec, int, Any], TaskResult] = inventory_task
            self._what = f"{len(self._units)} inventory data files"
        else:
            self._units = shard_groups(shards, options.listing_tasks)
            self._task = listing_task
            self._what = f"{len(shards)} L0 shards in {len(self._units)} groups"

    @property
    def task_count(self) -> int:
        return len(self._units)

    def run(self, spec: TaskSpec, verb: str) -> list[TaskResult]:
        sc = self._spark.sparkContext
        description = (
            f"epochgc gc {self._options.mode}: {verb}, M={spec.safe_epoch}, {self._what} "
            f"(run {spec.run_id})"
        )
        sc.setJobGroup(f"epochgc-{spec.run_id}", description, interruptOnCancel=True)
        sc.setLocalProperty("callSite.short", f"epochgc {verb} ({self._what})")
        sc.setLocalProperty("callSite.long", description)
        task = self._task
        units = list(enumerate(self._units))
        if not units:
            return []  # no shard in the bucket: nothing to run
        try:
            rdd = sc.parallelize(units, len(units))
            results: list[TaskResult] = rdd.map(lambda unit: task(spec, unit[0], unit[1])).collect()
        finally:
            sc.setLocalProperty("callSite.short", None)
            sc.setLocalProperty("callSite.long", None)
        for r in sorted(results, key=lambda r: r.task):
            log.debug("task %d: deleted %d in %.1fs", r.task, r.deleted, r.seconds)
        return results


def summarise(
    results: Sequence[TaskResult],
    *,
    run_id: str,
    engine: str,
    safe_epoch: int,
    controller_offset: int,
    started_at: datetime,
    dry_run: bool,
    driver_requests: dict[str, int],
    stopped: bool,
) -> RunSummary:
    """Sum the tasks into a run summary (docs/contract.md, "Run summary (version 2)")."""
    sweep = SweepResult(safe_epoch)
    sweep.listed = sum(r.listed for r in results)
    sweep.eligible = sum(r.eligible for r in results)
    sweep.deleted = sum(r.deleted for r in results)
    sweep.bytes_deleted = sum(r.bytes_deleted for r in results)
    sweep.errors = sum(r.errors for r in results)
    for verdict, count in sum_skipped(list(results)).items():
        if verdict is not Verdict.ELIGIBLE:
            sweep.skipped[verdict] += count
    requests = dict(driver_requests)
    for r in results:
        for op, n in r.requests.items():
            requests[op] = requests.get(op, 0) + n
    summary = RunSummary.of_sweep(
        run_id,
        engine,
        sweep,
        controller_offset=controller_offset,
        started_at=started_at,
        finished_at=datetime.now(UTC),
        dry_run=dry_run,
        requests=requests,
    )
    return dataclasses.replace(summary, success=False) if stopped else summary
