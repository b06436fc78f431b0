"""The Spark deletion job: ``epochgc gc spark`` (and ``spark-submit
spark_gc.py``).

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
import re
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from epochgc.errors import (
    CollectorPausedError,
    EpochGCError,
    InvalidArgumentError,
    SparkJobError,
)
from epochgc.events import EventChannel
from epochgc.gc.control import DeletingJob
from epochgc.gc.eligibility import Verdict
from epochgc.gc.listing.shards import discover_shards
from epochgc.gc.pause import PauseGuard
from epochgc.gc.rate import task_rate_share
from epochgc.gc.round_protocol import open_round, run_guarded_passes, write_summary_anyway
from epochgc.gc.run_report import (
    MAX_FAILED_FILES,
    RunSummary,
    run_figures,
    unparseable_note,
)
from epochgc.gc.spark.credentials import hand_over, without_secrets
from epochgc.gc.spark.phase_times import PhaseTimes
from epochgc.gc.spark.run_settings import SparkGcSettings
from epochgc.gc.spark.tasks import (
    ResultList,
    TaskResult,
    TaskSpec,
    decode_task_record,
    inventory_task,
    listing_task,
    sum_skipped,
    task_records_prefix,
    unparseable_named,
)
from epochgc.gc.sweeper import SweepResult
from epochgc.logging_setup import SHOWN
from epochgc.metrics.push import push_run
from epochgc.progress import ProgressLog
from epochgc.storage.client import ClientSettings
from epochgc.storage.inventory import (
    InventoryManifest,
    find_newest_manifest,
    load_manifest,
    store_for_bucket,
)
from epochgc.storage.keys import gc_run_prefix
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.wording import counted

log = logging.getLogger(__name__)

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
    worker_peak_rss_bytes: int = 0
    """The highest peak resident memory a task's Python worker reported
    (what ``spark.executor.pyspark.memory`` must cover)."""


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
    settings: SparkGcSettings,
    store: ObjectStore,
    stats: RequestStats,
    client: ClientSettings,
    options: SparkRunOptions,
    *,
    now: datetime | None = None,
    task_events: EventChannel | None = None,
    times: PhaseTimes | None = None,
) -> SparkOutcome:
    """Run the job (see the module docstring). Every task publishes its
    events on its copy of ``task_events`` too (``TaskSpec.events``:
    benchmarks and fault injection subscribe to ``ClientCreated``). The time of
    each phase (``safe_epoch``, ``plan``, ``count``, ``delete`` or
    ``dry_run``, ``summary``) is added to ``times``.

    Once the job starts (``M`` known, the collector not paused), the run
    summary is written whatever happens (``finally``): a failed or aborted
    job, a pause mid-job or an unreadable manifest leaves a summary marked
    failed with its one-line ``cause``, counting what tasks reported,
    including attempts that failed or were rerun (their task records).

    Raises:
        SafetyBlockedError: ``M`` cannot be computed from trusted inputs.
        CollectorPausedError: the collector is paused (not for a dry run),
            before the first deleting job, between counting and deleting, or
            mid-job (tasks stop within one batch).
        InvalidArgumentError: a bad ``--max-epoch`` or mode.
        InventoryError: no trustworthy manifest (inventory mode).
        SparkJobError: the job failed (tasks raised, the job was aborted).
    """
    if options.mode not in MODES:
        raise InvalidArgumentError(f"mode must be one of {MODES}, got {options.mode!r}")
    clock = time.perf_counter()
    times = times if times is not None else PhaseTimes()
    root = settings.root
    with times.phase("safe_epoch"):
        opened = open_round(store, root, now=now)
        started, run_id, safe = opened.started_at, opened.run_id, opened.safe
        safe_epoch = choose_safe_epoch(
            safe.safe_epoch,
            safe.controller_offset,
            options.max_epoch,
            allow_above_m=options.allow_above_m,
        )
    times.note("safe_epoch", f"M={safe_epoch}")
    if not options.dry_run:
        PauseGuard(store, root).check(DeletingJob.L0)
    engine = f"spark-{options.mode}"
    job = _Job(spark, store, run_id, options, times)
    failure: BaseException | None = None
    try:
        job.run(settings, store, client, safe_epoch, started, task_events, safe.controller_offset)
    except BaseException as err:
        failure = err
        raise _as_one_line(err, run_id) from err
    finally:
        summarising = time.perf_counter()
        lost = job.lost_attempts()
        records = settings.record_deletions
        gap = record_gap(job.results, lost, records=records)
        if gap is not None:
            short = [r for r in job.results if r.unrecorded()]
            short += [r for r in lost if _unrecorded_of_lost(r)]
            log.warning(
                "gc spark %s: %s, by %s%s: gc explain cannot name this run for those keys",
                run_id,
                gap,
                ", ".join(f"attempt {r.attempt} of task {r.task + 1}" for r in short[:5]),
                f" and {len(short) - 5} more" if len(short) > 5 else "",
            )
        summary = summarise(
            job.results,
            lost=lost,
            records=records,
            run_id=run_id,
            engine=engine,
            safe_epoch=safe_epoch,
            controller_offset=safe.controller_offset,
            started_at=started,
            dry_run=options.dry_run,
            driver_requests=stats.by_operation(),
            stopped=job.stopped is not None,
            cause=one_line_cause(failure) if failure is not None else job.paused,
        )
        key = write_summary_anyway(store, root, summary, failure, command="gc spark")
        never_deleted = unparseable_note(summary)
        if never_deleted is not None:
            log.warning("gc spark %s: %s", run_id, never_deleted)
        seconds = time.perf_counter() - clock
        log.log(
            logging.INFO if summary.success else logging.WARNING,
            "gc spark %s %s in %.1fs: listed %d, eligible %d, deleted %d (%d bytes), errors %d%s",
            run_id,
            "done" if summary.success else "FAILED",
            seconds,
            summary.listed,
            summary.eligible,
            summary.deleted,
            summary.bytes_deleted,
            summary.errors,
            f"; {summary.cause}" if summary.cause else "",
        )
        for sample in [s for r in job.results for s in r.error_samples][:10]:
            log.warning("gc spark %s error: %s", run_id, sample)
        if settings.pushgateway and failure is None:
            push_run(settings.pushgateway, engine, run_figures(summary, seconds), summary.skipped)
        times.seconds["summary"] = time.perf_counter() - summarising
    if job.paused is not None:
        raise CollectorPausedError(f"{job.paused} (mid-job; run {run_id}, summary {key})")
    plan_prefix = f"{gc_run_prefix(root, run_id)}plan/" if options.dry_run else None
    return SparkOutcome(
        summary,
        key,
        plan_prefix,
        job.stopped,
        job.manifest_key,
        job.task_count,
        max((r.peak_rss_bytes for r in job.results), default=0),
    )


def _as_one_line(err: BaseException, run_id: str) -> BaseException:
    """What the caller sees of a failed job: our own errors (and Ctrl-C) as
    they are, anything else (Py4J, PySpark) as a one-line ``SparkJobError``."""
    if isinstance(err, EpochGCError | KeyboardInterrupt | SystemExit):
        return err
    return SparkJobError(f"spark job failed: {one_line_cause(err)} (run {run_id})")


_PY_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): (.*)$")
_JVM_PREFIXES = ("org.", "java.", "scala.", "py4j.", "pyspark.errors.")


def one_line_cause(err: BaseException) -> str:
    """The cause of a failed job in one line. Pure.

    A task's Python exception reaches the driver wrapped in Java exceptions
    whose text holds the worker's whole traceback; what an operator needs
    is the worker's exception line (``ModuleNotFoundError: No module named
    'epochgc'``, ``pyarrow.lib.ArrowMemoryError: ...``): the line that ends
    the first Python traceback in the text. Without one (a worker that
    crashed, a lost executor), Spark's ``Job aborted ...`` line, else the
    first line of the message.
    """
    if isinstance(err, EpochGCError):
        return str(err).splitlines()[0] if str(err) else type(err).__name__
    if isinstance(err, KeyboardInterrupt):
        return "interrupted (KeyboardInterrupt)"
    lines = str(err).splitlines()
    in_traceback = False
    for line in lines:
        if "Traceback (most recent call last)" in line:
            in_traceback = True
            continue
        if in_traceback and line[:1].isspace():
            continue
        if in_traceback:
            match = _PY_EXCEPTION.match(line.strip())
            if match and not match.group(1).startswith(_JVM_PREFIXES):
                return _clip(f"{match.group(1).rsplit('.', 1)[-1]}: {match.group(2)}")
            in_traceback = False
    aborted = next((line for line in lines if "Job aborted" in line), None)
    if aborted is not None:  # no Python traceback (a worker died, a lost executor)
        return _clip(aborted[aborted.index("Job aborted") :].strip())
    first = next((line.strip() for line in lines if line.strip()), "")
    return _clip(f"{type(err).__name__}: {first}" if first else type(err).__name__)


def _clip(line: str, limit: int = 400) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


class _Job:
    """One ``gc spark`` run on the driver: the plan, the Spark jobs, and
    what the tasks reported (kept here so the driver's ``finally`` can sum
    it whatever happened)."""

    def __init__(
        self,
        spark: Any,
        store: ObjectStore,
        run_id: str,
        options: SparkRunOptions,
        times: PhaseTimes,
    ) -> None:
        self._spark = spark
        self._times = times
        self._store = store
        self._run_id = run_id
        self._options = options
        self.results: list[TaskResult] = []
        self.stopped: str | None = None
        self.paused: str | None = None
        self.manifest_key: str | None = None
        self.task_count = 0
        self._runner: _JobRunner | None = None
        self._phase = ""
        self._root = ""

    def run(
        self,
        settings: SparkGcSettings,
        store: ObjectStore,
        client: ClientSettings,
        safe_epoch: int,
        started: datetime,
        task_events: EventChannel | None,
        controller_offset: int,
    ) -> None:
        with self._times.phase("plan"):
            run, spec = self._plan(settings, store, client, safe_epoch, started, task_events)
        self._times.note("plan", run.what)
        self._run_jobs(run, spec, settings, store, safe_epoch, controller_offset)

    def _plan(
        self,
        settings: SparkGcSettings,
        store: ObjectStore,
        client: ClientSettings,
        safe_epoch: int,
        started: datetime,
        task_events: EventChannel | None,
    ) -> tuple[_JobRunner, TaskSpec]:
        """The tasks' spec and units: the credentials handed over, the
        inventory manifest read or the shards found."""
        options = self._options
        root = self._root = settings.root
        # The tasks carry no secret: the executors' environment does (spark_credentials).
        hand_over(self._spark, client, settings.credentials)
        spec = TaskSpec(
            client=without_secrets(client),
            bucket=settings.bucket,
            root=root,
            run_id=self._run_id,
            safe_epoch=safe_epoch,
            now=started,
            min_age=settings.min_age,
            dry_run=options.dry_run,
            retry=settings.retry,
            delete_concurrency=settings.delete_concurrency,
            shard_concurrency=settings.shard_concurrency,
            events=task_events if task_events is not None else EventChannel(),
            record_deletions=settings.record_deletions,
        )
        if options.mode == "inventory":
            location = settings.inventory
            inventory_store = store_for_bucket(store, location.bucket)
            self.manifest_key = find_newest_manifest(inventory_store, location)
            manifest = load_manifest(inventory_store, self.manifest_key)
            _check_source(manifest, settings.bucket)
            spec = dataclasses.replace(spec, inventory_bucket=location.bucket, manifest=manifest)
            log.info(
                "inventory %s: %s, %d data files, created %s",
                self.manifest_key,
                manifest.file_format,
                len(manifest.files),
                manifest.created_at.isoformat(),
            )
        shards = () if options.mode == "inventory" else discover_shards(store, root).shards
        run = self._runner = _JobRunner(self._spark, spec, options, shards)
        self.task_count = run.task_count
        share = task_rate_share(settings.rate_limit_keys_per_second, run.task_count, run.slots)
        return run, dataclasses.replace(spec, rate_limit_keys_per_second=share)

    def _run_jobs(
        self,
        run: _JobRunner,
        spec: TaskSpec,
        settings: SparkGcSettings,
        store: ObjectStore,
        safe_epoch: int,
        controller_offset: int,
    ) -> None:
        """The counting job (the guard on), then the deleting (or dry-run)
        job, each timed as its own phase."""
        options = self._options
        root = self._root
        share = spec.rate_limit_keys_per_second
        log.info(
            "gc spark %s (spark-%s%s): M=%d (controller offset %d), %d tasks%s",
            self._run_id,
            options.mode,
            ", dry run" if options.dry_run else "",
            safe_epoch,
            controller_offset,
            run.task_count,
            f", {share:.0f} keys/s each ({settings.rate_limit_keys_per_second:g} in all)"
            if share is not None
            else "",
        )
        guard_on = settings.max_delete_fraction < 1.0 and not options.force and not options.dry_run
        outcome = run_guarded_passes(
            _SparkPasses(self, run, spec),
            PauseGuard(store, root),
            dry_run=options.dry_run,
            guarded=guard_on,
            max_delete_fraction=settings.max_delete_fraction,
            command="epochgc gc spark",
            pause_read=True,  # by run_spark_gc, before the plan
        )
        if outcome.stopped_by_guard is not None:
            self.stopped = outcome.stopped_by_guard
            log.warning("gc spark %s stopped: %s", self._run_id, self.stopped)
            return
        self.paused = next((r.paused for r in self.results if r.paused), None)

    def count_job(self, run: _JobRunner, spec: TaskSpec) -> list[TaskResult]:
        """The counting job: every task lists its units to the end."""
        self._phase = "count"
        with self._times.phase(
            "count", f"{counted(run.task_count, 'task')} counting what would go"
        ):
            results = run.run(
                dataclasses.replace(spec, count_only=True, phase="count"), "count what would go"
            )
        self.results = results
        return results

    def deleting_job(self, run: _JobRunner, spec: TaskSpec) -> list[TaskResult]:
        """The deleting job, or a dry run's planning job."""
        options = self._options
        self._phase = "plan" if options.dry_run else "delete"
        self.results = []
        reading = "the inventory" if options.mode == "inventory" else "their shards"
        with self._times.phase(
            "dry_run" if options.dry_run else "delete",
            f"{counted(run.task_count, 'task')} reading {reading} and "
            + ("writing the plan" if options.dry_run else "deleting"),
        ):
            self.results = run.run(
                dataclasses.replace(spec, phase=self._phase),
                "plan (dry run)" if options.dry_run else "delete",
                sink=self.results,
            )
        return self.results

    def lost_attempts(self) -> list[TaskResult]:
        """Records of attempts whose result never reached the driver (a
        task that raised, an executor that died, a job aborted): their
        deletions happened and count. Only the deleting phase keeps them."""
        if self._phase != "delete":
            return []
        known = {r.attempt for r in self.results}
        return lost_attempts(self._store, self._root, self._run_id, known)


def lost_attempts(
    store: ObjectStore, root: str, run_id: str, known: Collection[str]
) -> list[TaskResult]:
    """The task records of the deleting phase of ``run_id`` but those of
    the ``known`` attempts (whose results reached the driver). A record
    that cannot be read is logged and left out."""
    prefix = task_records_prefix(root, run_id)
    lost: list[TaskResult] = []
    try:
        for info in store.list_objects(f"{prefix}delete-"):
            attempt = info.key.rsplit("-", 1)[-1].removesuffix(".json")
            if attempt in known:
                continue
            try:
                lost.append(decode_task_record(store.get(info.key).body))
            except (EpochGCError, ValueError, TypeError) as err:
                log.warning("gc spark %s: task record %s unreadable: %s", run_id, info.key, err)
    except EpochGCError as err:
        log.warning("gc spark %s: task records unreadable: %s", run_id, err)
    return lost


def record_gap(
    returned: Sequence[TaskResult], lost: Sequence[TaskResult], *, records: bool = True
) -> str | None:
    """What the run's deletion record misses, in one line, or ``None``
    when it misses nothing (or the run keeps none: ``records`` false,
    ``gc.record_deletions = false``). Pure.

    ``lost`` are the task records of attempts that never returned: their
    ``recorded`` says how many of their deletions are in uploaded parts, so
    the rest (at most the last ``RECORD_FLUSH_KEYS`` keys of an executor
    killed outright, all of them when its last part could not be uploaded)
    are gone from the bucket and in no record. A lost attempt's record
    without ``recorded`` (written by an executor older than that field,
    which uploaded its part only when it ended) counts all its deletions
    as unrecorded. ``returned`` attempts miss only the rows of parts whose
    upload failed.
    """
    if not records:
        return None
    of_lost = sum(_unrecorded_of_lost(r) for r in lost)
    of_returned = sum(r.unrecorded() for r in returned)
    if not of_lost and not of_returned:
        return None
    why = []
    if of_lost:
        why.append(f"{of_lost} of attempts that never returned")
    if of_returned:
        why.append(f"{of_returned} of parts that could not be uploaded")
    return (
        f"deletion record incomplete: {of_lost + of_returned} deletions unrecorded "
        f"({', '.join(why)})"
    )


class _SparkPasses:
    """The Spark engine's passes (``round_protocol.GuardedPasses``): one
    Spark job each, over the job's tasks."""

    def __init__(self, job: _Job, run: _JobRunner, spec: TaskSpec) -> None:
        self._job = job
        self._run = run
        self._spec = spec

    def count(self) -> list[TaskResult]:
        return self._job.count_job(self._run, self._spec)

    def delete(self, counted: list[TaskResult] | None) -> list[TaskResult]:
        return self._job.deleting_job(self._run, self._spec)

    def plan(self) -> list[TaskResult]:
        return self._job.deleting_job(self._run, self._spec)

    def listed_and_eligible(self, result: list[TaskResult]) -> tuple[int, int]:
        return sum(r.listed for r in result), sum(r.eligible for r in result)


def _check_source(manifest: InventoryManifest, bucket: str) -> None:
    if manifest.source_bucket != bucket:
        raise InvalidArgumentError(
            f"{manifest.key} inventories bucket {manifest.source_bucket!r}, but this job "
            f"deletes in {bucket!r}; refusing to act on another bucket's inventory"
        )


class _JobRunner:
    """Runs one Spark job over the plan's units (shard groups or files),
    printing a line per finished task as results arrive."""

    def __init__(
        self, spark: Any, spec: TaskSpec, options: SparkRunOptions, shards: Sequence[int]
    ) -> None:
        self._spark = spark
        self._options = options
        if spec.manifest is not None:
            self._units: Sequence[Any] = list(spec.manifest.files)
            self._task: Callable[[TaskSpec, int, Any], TaskResult] = inventory_task
            self._what = counted(len(self._units), "inventory data file")
        else:
            self._units = shard_groups(shards, options.listing_tasks)
            self._task = listing_task
            self._what = (
                f"{counted(len(shards), 'L0 shard')} in {counted(len(self._units), 'group')}"
            )

    @property
    def task_count(self) -> int:
        return len(self._units)

    @property
    def what(self) -> str:
        """What the tasks work through (``3 L0 shards in 2 groups``)."""
        return self._what

    @property
    def slots(self) -> int:
        """Tasks the cluster runs at once (Spark's default parallelism)."""
        return int(self._spark.sparkContext.defaultParallelism)

    def run(
        self, spec: TaskSpec, verb: str, *, sink: list[TaskResult] | None = None
    ) -> list[TaskResult]:
        """Run the tasks; return their results. Finished tasks' results are
        appended to ``sink`` as they arrive (what the caller still has when
        the job fails).

        Raises:
            whatever the Spark job raised (a task's exception, an abort).
        """
        sc = self._spark.sparkContext
        units = list(enumerate(self._units))
        if not units:
            return []  # no shard in the bucket: nothing to run
        if spec.manifest is not None:
            # tasks need the format and columns, not the list of every file
            spec = dataclasses.replace(spec, manifest=dataclasses.replace(spec.manifest, files=()))
        finished = sink if sink is not None else []
        group = f"epochgc-{spec.run_id}-{spec.phase}"
        description = (
            f"epochgc gc {self._options.mode}: {verb}, M={spec.safe_epoch}, {self._what} "
            f"(run {spec.run_id})"
        )
        accumulator = sc.accumulator([], ResultList())
        task = self._task

        def run_unit(unit: tuple[int, Any]) -> TaskResult:
            result = task(spec, unit[0], unit[1])
            accumulator.add([result])
            return result

        outcome: dict[str, Any] = {}

        def job() -> None:
            # local properties belong to the thread that submits the job
            sc.setJobGroup(group, description, interruptOnCancel=True)
            sc.setLocalProperty("callSite.short", f"epochgc {verb} ({self._what})")
            sc.setLocalProperty("callSite.long", description)
            try:
                outcome["results"] = sc.parallelize(units, len(units)).map(run_unit).collect()
            except BaseException as err:  # handed to the driver's thread
                outcome["error"] = err
            finally:
                sc.setLocalProperty("callSite.short", None)
                sc.setLocalProperty("callSite.long", None)

        progress = ProgressLog(
            log, f"gc spark {verb} M={spec.safe_epoch}", len(units), unit="tasks"
        )
        reported = 0
        thread = threading.Thread(target=job, name="epochgc-spark-job", daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                thread.join(0.5)
                reported = self._report(accumulator.value, reported, finished, progress, len(units))
        except BaseException:
            sc.cancelJobGroup(group)
            thread.join(30)
            raise
        finally:
            self._report(accumulator.value, reported, finished, progress, len(units))
        if "error" in outcome:
            raise outcome["error"]
        results: list[TaskResult] = outcome["results"]
        return results

    def _report(
        self,
        arrived: list[TaskResult],
        reported: int,
        finished: list[TaskResult],
        progress: ProgressLog,
        total: int,
    ) -> int:
        for r in arrived[reported:]:
            finished.append(r)
            log.info(
                "task %d/%d done (%s): %s, worker peak %d MiB%s",
                r.task + 1,
                total,
                r.what,
                r.counts(),
                r.peak_rss_bytes // 2**20,
                f"; {r.cause}" if r.cause else "",
                extra=SHOWN,  # progress: shown by a one-shot gc spark too
            )
            for line in r.log_lines:
                log.warning("task %d: %s", r.task + 1, line)
            progress.advance(1, deleted=r.deleted)
        return len(arrived)


def _unrecorded_of_lost(result: TaskResult) -> int:
    return result.deleted if result.recorded is None else result.unrecorded()


def summarise(
    results: Sequence[TaskResult],
    *,
    lost: Sequence[TaskResult] = (),
    records: bool = True,
    run_id: str,
    engine: str,
    safe_epoch: int,
    controller_offset: int,
    started_at: datetime,
    dry_run: bool,
    driver_requests: dict[str, int],
    stopped: bool,
    cause: str | None = None,
) -> RunSummary:
    """Sum the tasks into a run summary (docs/contract.md, "Run summary
    (version 2)"). ``results`` are the attempts whose result reached the
    driver, ``lost`` the task records of attempts that never returned (so
    one task may appear in both): deletions of every attempt count; an
    attempt that did not finish counts what it deleted as listed and
    eligible, since its listing is lost with it. Deletions missing from the
    deletion record (``record_gap``; ``records``: the run keeps one) fail
    the run and are named in its ``cause``, after the job's own cause."""
    gap = record_gap(results, lost, records=records)
    if gap is not None:
        cause = f"{cause}; {gap}" if cause else gap
    results = [*results, *lost]
    sweep = SweepResult(safe_epoch)
    sweep.listed = sum(r.listed for r in results)
    sweep.eligible = sum(r.eligible for r in results)
    sweep.deleted = sum(r.deleted for r in results)
    sweep.bytes_deleted = sum(r.bytes_deleted for r in results)
    sweep.errors = sum(r.errors for r in results)
    for verdict, count in sum_skipped(list(results)).items():
        if verdict is not Verdict.ELIGIBLE:
            sweep.skipped[verdict] += count
    sweep.unparseable_keys = unparseable_named(results)
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
    failed_files = tuple(pair for r in results for pair in r.failed_files)
    summary = dataclasses.replace(
        summary, cause=cause, failed_files=failed_files[:MAX_FAILED_FILES]
    )
    return dataclasses.replace(summary, success=False) if stopped or cause else summary
