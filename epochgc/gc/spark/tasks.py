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

Limits, as for the local engine: each task deletes at its share of
``gc.rate_limit_keys_per_second`` (``TaskSpec.rate_limit_keys_per_second``,
computed by the driver), with ``gc.delete_concurrency`` DeleteObjects in
flight, and reads the control document before every DeleteObjects: once
the collector is paused, the task sends no further batch (at most the
batches already past that check still go) and reports the pause.

A record of every attempt: a deleting task writes its running totals to
``{run}/tasks/{phase}-{task:05d}-{attempt}.json`` after every batch and
once more when it ends (finished, or failed with its one-line cause), so
the driver can count the deletions of an attempt that crashed, or whose
executor died, even though Spark never returns that attempt's result.

The deletion record of an attempt (``_RecordParts``): the keys each batch
confirmed stream to a local Parquet file, uploaded as a part of the run's
record every ``RECORD_FLUSH_KEYS`` keys and once more when the attempt
ends, however it ends (an exception included). The task record says how
many of its deletions are in uploaded parts (``recorded``), so for an
attempt killed outright the driver knows how many went unrecorded.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import resource
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from epochgc.errors import EpochGCError
from epochgc.events import Event, EventChannel
from epochgc.gc.control import paused_message, read_control
from epochgc.gc.deletion_record import DeletionRecord
from epochgc.gc.eligibility import Verdict
from epochgc.gc.plan_file import PlanWriter
from epochgc.gc.spark.inventory_filter import select_eligible
from epochgc.gc.sweeper import (
    DeleteBatchDone,
    ObjectsPlanned,
    Sweeper,
    SweepPolicy,
    SweepResult,
    name_unparseable,
)
from epochgc.storage.client import ClientSettings, make_s3_client
from epochgc.storage.inventory import (
    InventoryFile,
    InventoryManifest,
    download_data_file,
    iter_data_batches,
)
from epochgc.storage.keys import gc_run_deleted_key, gc_run_prefix
from epochgc.storage.object_store import MAX_KEYS_PER_DELETE, DeleteOutcome, ObjectInfo
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.retry import RetryPolicy
from epochgc.storage.s3 import S3ObjectStore

log = logging.getLogger(__name__)

RECORD_FLUSH_KEYS = 10_000
"""Confirmed deletions after which a deleting attempt uploads the rows of
its deletion record so far as a part of their own (``_RecordParts``): an
executor killed outright, with no Python left to upload anything, takes at
most this many keys (plus the batches in flight) out of the record, and
its task record says how many. Why 10,000: one extra PUT per 10,000
deletions, against the 30-odd requests those deletions already take (per
1,000 keys a DeleteObjects, a read of the control document, a task record
PUT and, in listing mode, a LIST page), about 3% more; a part of 10,000
rows is about 400 KB, so ``gc explain`` reads at most one more part per
10,000 deletions, and a smaller figure would multiply the parts it reads."""


@dataclass(frozen=True)
class ClientCreated(Event):
    """A task made a boto3 client (for its bucket, or for the inventory's),
    before it sends anything: benchmarks add latency to it, fault-injection
    tests add faults (botocore event handlers). A subscriber's error fails
    the task, as a task that could not set up its client would."""

    client: Any


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
    events: EventChannel = field(default_factory=EventChannel)
    """The job's observers of its tasks: every event of a task attempt
    (``ClientCreated``, ``DeleteBatchDone``, ...) is published here too,
    after the attempt's own subscribers. Shipped with the spec, so its
    subscribers must pickle; each task works on its own copy."""
    rate_limit_keys_per_second: float | None = None
    """This task's share of ``gc.rate_limit_keys_per_second`` (``None``:
    no limit; SlowDown still halves the rate)."""
    phase: str = "delete"
    """``count``, ``plan`` or ``delete``: names the task records."""
    record_deletions: bool = True
    """A deleting task writes the keys it deleted (``gc.deletion_record``)."""


@dataclass
class TaskResult:
    """What one task saw and did (summed by the driver)."""

    task: int
    listed: int = 0
    eligible: int = 0
    deleted: int = 0
    bytes_deleted: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    unparseable_keys: list[str] = field(default_factory=list)
    """The first ``NAMED_UNPARSEABLE`` keys it skipped as unparseable."""
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    plan_key: str | None = None
    what: str = ""
    """The task's slice of the work (shards or data file), for log lines."""
    attempt: str = ""
    """Unique per attempt: a rerun task writes a record of its own."""
    finished: bool = False
    """The attempt ran to its end (its result reached, or could reach, the driver)."""
    cause: str | None = None
    """Why the attempt ended early: its exception in one line."""
    paused: str | None = None
    """``paused by WHO: REASON`` when the control document stopped it."""
    failed_files: list[tuple[str, str]] = field(default_factory=list)
    """Inventory data files this task could not read: (key, cause)."""
    log_lines: list[str] = field(default_factory=list)
    """The task's own warnings, for the driver to print (bounded)."""
    peak_rss_bytes: int = 0
    """Peak resident memory of the Python worker that ran it."""
    recorded: int | None = None
    """Deletions of this attempt in uploaded parts of the run's deletion
    record (``None``: it keeps no record: records off, a pass that deletes
    nothing; the driver reads a lost attempt's ``None`` under records on,
    an executor older than this field, as nothing recorded)."""

    def unrecorded(self) -> int:
        """Deletions of this attempt that are in no uploaded part of the
        run's deletion record (0 when it keeps no record)."""
        return 0 if self.recorded is None else max(0, self.deleted - self.recorded)

    def counts(self) -> str:
        """What it did, for the executor's and the driver's log lines."""
        rate = self.deleted / self.seconds if self.seconds > 0 else 0.0
        return (
            f"listed {self.listed}, eligible {self.eligible}, deleted {self.deleted} in "
            f"{self.seconds:.1f}s ({rate:.0f} keys/s), errors {self.errors}"
        )


def _open_store(
    spec: TaskSpec, bucket: str, events: EventChannel
) -> tuple[S3ObjectStore, RequestStats]:
    client = make_s3_client(spec.client)
    events.publish(ClientCreated(client))
    stats = RequestStats()
    stats.attach(client)
    store = S3ObjectStore(
        client,
        bucket,
        retry_policy=spec.retry,
        delete_concurrency=spec.delete_concurrency,
        events=events,
    )
    return store, stats


def listing_task(spec: TaskSpec, task: int, shards: list[int]) -> TaskResult:
    """Sweep ``shards`` (delete, plan, or only count)."""
    with _Attempt(spec, task, f"shards {shards[0]}..{shards[-1]}") as attempt:
        store = attempt.store
        sweeper = attempt.sweeper()
        planning = spec.dry_run or spec.count_only
        writes_plan = spec.dry_run and not spec.count_only
        plan_key = f"{gc_run_prefix(spec.root, spec.run_id)}plan/part-{task:05d}.parquet"
        with (
            PlanWriter(with_last_modified=False) as plan,
            attempt.events.subscribed(ObjectsPlanned, plan.on_planned),
        ):
            sweep = sweeper.sweep(
                shards,
                spec.safe_epoch,
                spec.now,
                dry_run=planning,
                plan=writes_plan,
                full_listing=spec.count_only,
                stop=attempt.stop,
            )
            attempt.take_sweep(sweep)
            if writes_plan:
                try:
                    attempt.result.plan_key = plan.upload(store, plan_key)
                except EpochGCError as err:
                    attempt.error(f"{plan_key}: {err}")
    return attempt.result


def inventory_task(spec: TaskSpec, task: int, entry: InventoryFile) -> TaskResult:
    """Filter one inventory data file and delete (or plan, or count) what
    it allows, a batch of rows at a time: the file is copied to local disk
    (MD5 checked), then read in row batches, each filtered and handed on
    before the next is read. A file that cannot be read, including an
    Arrow memory error, fails that file (counted, named in the result),
    not the task."""
    with _Attempt(spec, task, entry.key) as attempt:
        assert spec.manifest is not None, "inventory mode ships the manifest"
        source = (
            attempt.store
            if spec.inventory_bucket in ("", spec.bucket)
            else _open_store(spec, spec.inventory_bucket, attempt.events)[0]
        )
        with tempfile.NamedTemporaryFile(prefix="epochgc-inventory-") as local:
            try:
                download_data_file(source, entry, local)
            except _READ_ERRORS as err:
                attempt.fail_file(
                    entry.key, str(err) if isinstance(err, EpochGCError) else one_line(err)
                )
                return attempt.result
            batches = _eligible_batches(attempt, local.name, entry)
            if spec.count_only:
                for _ in batches:
                    pass
            elif spec.dry_run:
                _write_plan_part(attempt, batches)
            else:
                _delete_batches(attempt, batches)
    return attempt.result


_READ_ERRORS = (EpochGCError, pa.ArrowException, MemoryError, OSError)
"""What fails one data file: unreadable contents, a store error, and the
memory errors of a worker under ``spark.executor.pyspark.memory``."""


def _eligible_batches(attempt: _Attempt, path: str, entry: InventoryFile) -> Iterator[pa.Table]:
    """The eligible rows (``key``, ``size``) of each batch of the file, the
    result's counts kept as they go; a read error ends the file there."""
    spec = attempt.spec
    result = attempt.result
    assert spec.manifest is not None
    try:
        for rows in iter_data_batches(path, spec.manifest, entry):
            selection = select_eligible(
                rows,
                root=spec.root,
                safe_epoch=spec.safe_epoch,
                now=spec.now,
                min_age=spec.min_age,
            )
            del rows
            result.listed += selection.listed
            result.eligible += selection.eligible.num_rows
            for verdict, n in selection.skipped.items():
                if n:
                    result.skipped[verdict.value] = result.skipped.get(verdict.value, 0) + n
            name_unparseable(result.unparseable_keys, selection.unparseable)
            yield selection.eligible
    except _READ_ERRORS as err:
        attempt.fail_file(entry.key, one_line(err))


def _delete_batches(attempt: _Attempt, batches: Iterator[pa.Table]) -> None:
    """Delete through the sweeper's own delete path (batches of 1000,
    several in flight, AIMD on SlowDown, per-key errors counted, the rate
    share and the pause check), fed lazily a row batch at a time."""
    now = attempt.spec.now

    def rows() -> Iterator[ObjectInfo]:
        for table in batches:
            for batch in table.to_batches(max_chunksize=MAX_KEYS_PER_DELETE):
                keys = batch.column("key").to_pylist()
                sizes = batch.column("size").to_pylist()
                for key, size in zip(keys, sizes, strict=True):
                    yield ObjectInfo(key, size or 0, "", now)

    done = attempt.sweeper().delete_objects(
        rows(),
        attempt.spec.safe_epoch,
        stop=attempt.stop,
    )
    result = attempt.result
    result.deleted += done.deleted
    result.bytes_deleted += done.bytes_deleted
    result.errors += done.errors
    result.error_samples += done.error_samples


class _RecordParts:
    """One attempt's share of the run's deletion record, uploaded in chunks.

    The keys each DeleteObjects confirmed stream to a temporary Parquet file
    (``DeletionRecord``); once it holds ``RECORD_FLUSH_KEYS`` rows it is
    uploaded as ``deleted/part-{task:05d}-{attempt}-{chunk:05d}.parquet``
    and the next rows go to a new file. ``finish`` uploads the rest, and is
    called however the attempt ends. ``recorded`` counts the rows in
    uploaded parts: what the attempt's task record tells the driver. A part
    whose upload fails is the task's error; its rows stay out of
    ``recorded`` (the driver names them). Fed by the sweeper's
    ``DeleteBatchDone`` from its deleting threads: one of them adds or
    uploads at a time.
    """

    def __init__(self, attempt: _Attempt) -> None:
        self._attempt = attempt
        self._lock = threading.Lock()
        self._open: DeletionRecord | None = None
        self._chunk = 0
        self._finished = False
        self.recorded = 0

    def add(self, batch: Sequence[ObjectInfo]) -> None:
        """Record one batch of confirmed deletions; upload the chunk it fills."""
        spec = self._attempt.spec
        with self._lock:
            if self._open is None:
                self._open = DeletionRecord(spec.root, spec.safe_epoch)
            self._open.add(batch)
            # once finished, a late batch goes up at once rather than be lost
            if self._finished or self._open.rows >= RECORD_FLUSH_KEYS:
                self._upload()

    def on_batch_done(self, event: DeleteBatchDone) -> None:
        """Subscriber: record the objects a DeleteObjects batch confirmed."""
        if event.deleted:
            self.add(event.deleted)

    def finish(self) -> None:
        """Upload the rows not yet in a part (the attempt is ending)."""
        with self._lock:
            self._finished = True
            if self._open is not None:
                self._upload()

    def _upload(self) -> None:
        record, self._open = self._open, None
        assert record is not None
        spec, result = self._attempt.spec, self._attempt.result
        key = gc_run_deleted_key(spec.root, spec.run_id, result.task, result.attempt, self._chunk)
        self._chunk += 1
        with record:
            if not record.rows:
                return
            try:
                record.upload(self._attempt.store, key)
            except _RECORD_ERRORS as err:
                cause = str(err) if isinstance(err, EpochGCError) else one_line(err)
                log.warning(
                    "task %d: deletion record part %s (%d keys) not uploaded: %s",
                    result.task,
                    key,
                    record.rows,
                    cause,
                )
                self._attempt.locked_error(f"{key}: {cause}")
                return
            self.recorded += record.rows


_RECORD_ERRORS = (EpochGCError, pa.ArrowException, OSError)
"""What fails the upload of a part: the store, or the local file."""


def _write_plan_part(attempt: _Attempt, batches: Iterator[pa.Table]) -> None:
    """Stream the eligible rows into this task's part of the plan
    (``{run}/plan/part-{task:05d}.parquet``)."""
    spec = attempt.spec
    key = f"{gc_run_prefix(spec.root, spec.run_id)}plan/part-{attempt.result.task:05d}.parquet"
    with PlanWriter(with_last_modified=False) as plan:
        for table in batches:
            plan.write_table(table)  # the eligible rows, as Arrow
        try:
            attempt.result.plan_key = plan.upload(attempt.store, key)
        except EpochGCError as err:
            attempt.error(f"{key}: {err}")


def task_record_key(root: str, run_id: str, phase: str, task: int, attempt: str) -> str:
    """Where an attempt's running totals are kept (beside the summary)."""
    return f"{task_records_prefix(root, run_id)}{phase}-{task:05d}-{attempt}.json"


def task_records_prefix(root: str, run_id: str) -> str:
    return f"{gc_run_prefix(root, run_id)}tasks/"


def encode_task_record(result: TaskResult) -> bytes:
    """An attempt's record: the ``TaskResult`` fields as JSON (``v`` 1)."""
    return json.dumps({"v": 1, **dataclasses.asdict(result)}, sort_keys=True).encode("utf-8")


def decode_task_record(data: bytes) -> TaskResult:
    """The ``TaskResult`` of a record (unknown fields ignored).

    Raises:
        ValueError: not a record this version can read.
    """
    doc = json.loads(data.decode("utf-8"))
    if not isinstance(doc, dict) or doc.get("v") != 1:
        raise ValueError("not a version 1 task record")
    names = {f.name for f in dataclasses.fields(TaskResult)}
    fields = {k: v for k, v in doc.items() if k in names}
    fields["failed_files"] = [tuple(pair) for pair in fields.get("failed_files", [])]
    return TaskResult(**fields)


def one_line(err: BaseException) -> str:
    """An exception as the one line an operator reads."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


class _PauseGate:
    """The task's store, with the control document read before every
    DeleteObjects: once paused (or unreadable: deleting must not go on
    without knowing), the batch is not sent, the task's stop event is set
    and the attempt says why. Everything else goes straight through."""

    def __init__(self, store: S3ObjectStore, root: str, attempt: _Attempt) -> None:
        self._store = store
        self._root = root
        self._attempt = attempt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        if self._attempt.stop.is_set():
            return DeleteOutcome((), {}, 0)
        try:
            doc, _ = read_control(self._store, self._root)
        except EpochGCError as err:
            self._attempt.halt(None, f"control document unreadable: {err}")
            return DeleteOutcome((), {}, 0)
        paused = paused_message(doc)
        if paused is not None:
            self._attempt.halt(paused, None)
            return DeleteOutcome((), {}, 0)
        return self._store.delete_batch(keys)


class _Attempt:
    """One attempt of one task: its store, its result, its record.

    Used as a context manager around the task's work: it writes the record
    after every DeleteObjects batch (deleting tasks only) and at the end;
    an exception is recorded with its one-line cause and re-raised, so
    Spark still sees the task fail (and may rerun it). Its stores and its
    sweeper publish on ``events``, the attempt's own channel: a deleting
    attempt's deletion record, then its running totals, subscribe to
    ``DeleteBatchDone`` there (in that order: the task record written after
    a batch counts that batch's rows as recorded), then the job's
    observers (``TaskSpec.events``) get every event; the end, an exception
    included, uploads the part it has before the last record.
    """

    def __init__(self, spec: TaskSpec, task: int, what: str) -> None:
        _worker_logging()
        self.spec = spec
        self.started = time.perf_counter()
        self.result = TaskResult(task, what=what, attempt=uuid.uuid4().hex[:12])
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._records = not (spec.dry_run or spec.count_only)
        self._key = task_record_key(spec.root, spec.run_id, spec.phase, task, self.result.attempt)
        self._capture = _WarningCapture(self.result.log_lines)
        self._parts = _RecordParts(self) if self._records and spec.record_deletions else None
        # running totals of the deletions so far (the sweeper's result
        # arrives only at the end)
        self._deleted = 0
        self._bytes = 0
        self._failed = 0
        self.events = EventChannel()
        if self._parts is not None:
            self.events.subscribe(DeleteBatchDone, self._parts.on_batch_done)
        self.events.subscribe(DeleteBatchDone, self._on_batch)
        self.events.subscribe(Event, spec.events.publish)
        self._store, self.stats = _open_store(spec, spec.bucket, self.events)
        self.store: S3ObjectStore = self._store
        self._gate = _PauseGate(self._store, spec.root, self)

    def _recorded(self) -> int | None:
        return None if self._parts is None else self._parts.recorded

    def sweeper(self) -> Sweeper:
        spec = self.spec
        return Sweeper(
            self._gate,
            spec.root,
            SweepPolicy(
                min_object_age=spec.min_age,
                shard_concurrency=spec.shard_concurrency,
                delete_concurrency=spec.delete_concurrency,
                rate_limit_keys_per_second=spec.rate_limit_keys_per_second,
            ),
            events=self.events,
        )

    def take_sweep(self, sweep: SweepResult) -> None:
        r = self.result
        r.listed += sweep.listed
        r.eligible += sweep.eligible
        r.deleted += sweep.deleted
        r.bytes_deleted += sweep.bytes_deleted
        for verdict, n in sweep.skipped.items():
            r.skipped[verdict.value] = r.skipped.get(verdict.value, 0) + n
        name_unparseable(r.unparseable_keys, sweep.unparseable_keys)
        r.errors += sweep.errors
        r.error_samples += list(sweep.error_samples)

    def error(self, message: str) -> None:
        self.result.errors += 1
        if len(self.result.error_samples) < 10:
            self.result.error_samples.append(message)

    def locked_error(self, message: str) -> None:
        """``error`` from a deleting thread."""
        with self._lock:
            self.error(message)

    def fail_file(self, key: str, cause: str) -> None:
        """A data file that could not be read (or only in part)."""
        self.error(f"{key}: {cause}")
        self.result.failed_files.append((key, cause))
        log.warning("inventory data file %s failed: %s", key, cause)

    def halt(self, paused: str | None, cause: str | None) -> None:
        """Stop deleting (a pause, or a control document that cannot be read)."""
        with self._lock:
            if not self.stop.is_set():
                self.result.paused = paused
                self.result.cause = cause or paused
                if cause is not None:
                    self.error(cause)
            self.stop.set()

    def _on_batch(self, event: DeleteBatchDone) -> None:
        with self._lock:
            self._deleted += event.keys_deleted
            self._bytes += event.bytes_deleted
            self._failed += len(event.failed_keys)
            partial = dataclasses.replace(
                self.result,
                listed=max(self.result.listed, self._deleted),
                eligible=max(self.result.eligible, self._deleted),
                deleted=self._deleted,
                bytes_deleted=self._bytes,
                errors=self.result.errors + self._failed,
                recorded=self._recorded(),
            )
            self._record(partial)

    def _record(self, result: TaskResult) -> None:
        if not self._records:
            return
        try:
            self._store.put(self._key, encode_task_record(result))
        except EpochGCError as err:
            log.warning("task %d: could not write its record %s: %s", result.task, self._key, err)

    def __enter__(self) -> _Attempt:
        # added here, removed in __exit__: a reused worker must not keep
        # handlers of earlier tasks
        logging.getLogger("epochgc").addHandler(self._capture)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._parts is not None:
            # however the attempt ends, its deletions are done: the rows it
            # has go up before its last task record says how many did
            self._parts.finish()
            self.result.recorded = self._parts.recorded
        logging.getLogger("epochgc").removeHandler(self._capture)
        r = self.result
        r.requests = self.stats.by_operation()
        r.seconds = time.perf_counter() - self.started
        r.peak_rss_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        if exc is not None:
            with self._lock:
                # the sweeper never returned: its totals so far are the record's
                r.cause = one_line(exc)
                r.deleted = max(r.deleted, self._deleted)
                r.bytes_deleted = max(r.bytes_deleted, self._bytes)
                r.listed = max(r.listed, r.deleted)
                r.eligible = max(r.eligible, r.deleted)
                r.errors = max(r.errors, self._failed) + 1
                self._record(r)
            log.warning("spark task %d (%s) failed: %s", r.task, r.what, r.cause)
            return
        r.finished = True
        with self._lock:
            self._record(r)
        log.info("spark task %d (%s): %s", r.task, r.what, r.counts())


class _WarningCapture(logging.Handler):
    """Keeps a task's own warnings (at most 20) for its result, so they
    reach the driver's log and not only the executor's stderr."""

    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.WARNING)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if len(self._sink) < 20:
            self._sink.append(f"{record.levelname} {record.name}: {record.getMessage()}")


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


def unparseable_named(results: Iterable[TaskResult]) -> list[str]:
    """The first ``NAMED_UNPARSEABLE`` unparseable keys of all tasks, in
    task order."""
    named: list[str] = []
    for r in sorted(results, key=lambda r: r.task):
        name_unparseable(named, r.unparseable_keys)
    return named


def sum_skipped(results: list[TaskResult]) -> dict[Verdict, int]:
    """Skip counts of all tasks, by verdict."""
    totals: dict[Verdict, int] = {}
    for r in results:
        for name, count in r.skipped.items():
            verdict = Verdict(name)
            totals[verdict] = totals.get(verdict, 0) + count
    return totals


class ResultList:
    """Accumulator parameter (PySpark's ``AccumulatorParam`` protocol) that
    collects finished tasks' results on the driver as each task ends: Spark
    applies a successful task's update once, when it finishes, so the
    driver can report progress before the job is over.

    It lives here, with the tasks, because Spark pickles it into every task
    by reference: executors import this module, never the driver's
    ``spark_job`` (which imports what only the driver has)."""

    def zero(self, _value: list[TaskResult]) -> list[TaskResult]:
        return []

    def addInPlace(self, value1: list[TaskResult], value2: list[TaskResult]) -> list[TaskResult]:  # noqa: N802 - PySpark's name
        value1.extend(value2)
        return value1
