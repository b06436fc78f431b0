"""The Spark job obeys every limit and leaves a record of every run: the
cluster-wide rate limit measured from the store's side, a pause landing
mid-job, tasks that crash after deleting, tasks that cannot even start."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from epochgc.errors import CollectorPausedError, EpochGCError
from epochgc.gc.deletion_record import deleted_keys
from epochgc.gc.run_report import RunSummary, decode_summary, list_runs
from epochgc.gc.spark.tasks import RECORD_FLUSH_KEYS
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.inventory import build_inventory
from epochgc.storage.keys import encode_l0_key, gc_run_summary_key
from epochgc.storage.object_store import ObjectInfo
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.wiring.settings import inventory_location
from tests.support.cli import run_cli
from tests.support.moto_seed import seed_objects
from tests.support.spark_job import ROOT, SHARDS, M, make_config, run_job
from tests.support.task_hooks import (
    DeleteLog,
    ExitBeforeDelete,
    FailAtStart,
    FailBeforeDelete,
    LimitMemory,
    PauseAfterDeletes,
    read_delete_log,
)


def eligible_world(store: S3ObjectStore, bucket: str, per_shard: int) -> list[str]:
    """M = 10 and ``per_shard`` eligible keys in each of the 8 shards."""
    Controller(store, ROOT).advance_to(M)
    keys = [
        encode_l0_key(ROOT, s, 1 + i % M, str(uuid.uuid4()))
        for s in range(SHARDS)
        for i in range(per_shard)
    ]
    seed_objects(bucket, keys)
    return keys


def l0_left(store: S3ObjectStore) -> set[str]:
    return {o.key for o in store.list_objects(f"{ROOT}/l0/")}


def only_summary(store: S3ObjectStore) -> RunSummary:
    runs = list_runs(store, ROOT)
    assert len(runs) == 1, runs
    return decode_summary(store.get(gc_run_summary_key(ROOT, runs[0])).body)


def test_the_rate_limit_is_cluster_wide_as_the_store_sees_it(
    spark: Any, tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    """400 keys/s over 2 tasks running at once: the store must not see
    more than 400 keys/s (from the first task's start to the last delete),
    whatever each task would manage alone (thousands of keys/s here)."""
    limit = 400.0
    keys = eligible_world(store, bucket, per_shard=150)
    config = make_config(tmp_path, s3_server, bucket, f"rate_limit_keys_per_second = {limit}\n")
    log_path = tmp_path / "deletes.log"
    outcome = run_job(
        spark, config, store, s3_server, listing_tasks=2, on_client_created=DeleteLog(str(log_path))
    )
    assert outcome.summary.deleted == len(keys) and not l0_left(store)
    starts, deletes = read_delete_log(log_path)
    deleted = sum(n for _, n in deletes)
    assert deleted == len(keys)
    seconds = max(t for t, _ in deletes) - min(starts)
    measured = deleted / seconds
    assert measured <= limit * 1.1, f"{measured:.0f} keys/s with a limit of {limit:.0f}"


def test_a_pause_mid_job_stops_each_task_within_one_batch_and_the_run_says_paused(
    spark: Any, tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    """2 tasks of 2,000 keys (2 batches each), one DeleteObjects in flight
    per task; the collector is paused right after the first batch of the
    job. Each task checks the control document before each batch, so at
    most the other task's first batch still goes; the run's record says
    paused, by whom, and counts exactly what the store deleted."""
    keys = eligible_world(store, bucket, per_shard=500)
    config = make_config(tmp_path, s3_server, bucket, "delete_concurrency = 1\n")
    hook = PauseAfterDeletes(str(tmp_path / "paused"), bucket, ROOT, by="dave", reason="mid-job")
    with pytest.raises(CollectorPausedError, match=r"^paused by dave: mid-job"):
        run_job(spark, config, store, s3_server, listing_tasks=2, on_client_created=hook)
    gone = len(keys) - len(l0_left(store))
    assert 1000 <= gone <= 2000, f"{gone} keys deleted after a pause at 1000"
    summary = only_summary(store)
    assert not summary.success and summary.cause == "paused by dave: mid-job"
    assert summary.deleted == gone


def test_a_task_that_crashes_after_deleting_leaves_a_failed_record_with_its_deletions(
    spark: Any, tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    """One task of 4,000 keys crashes right before its third DeleteObjects
    (the job aborts: local mode does not retry). The run summary exists,
    says failed with the task's one-line cause, and counts the 2,000 keys
    the store really deleted."""
    keys = eligible_world(store, bucket, per_shard=500)
    config = make_config(tmp_path, s3_server, bucket, "delete_concurrency = 1\n")
    with pytest.raises(EpochGCError) as failed:
        run_job(
            spark,
            config,
            store,
            s3_server,
            listing_tasks=1,
            on_client_created=FailBeforeDelete(3, "injected crash"),
        )
    assert "RuntimeError: injected crash" in str(failed.value)
    assert "\n" not in str(failed.value)
    gone = len(keys) - len(l0_left(store))
    assert gone == 2000
    summary = only_summary(store)
    assert not summary.success
    assert summary.cause is not None and "RuntimeError: injected crash" in summary.cause
    assert summary.deleted == gone and summary.errors >= 1


def test_a_task_that_crashes_after_deleting_leaves_its_deletions_in_the_deletion_record(
    spark: Any, tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    """Issue 39 (the deletion record is exact): the same crash as above, a
    task of 4,000 keys raising right before its third DeleteObjects. Its
    2,000 deleted keys were gone from the bucket and in no record (the part
    was uploaded only when the task ended well). The run's record lists
    exactly the keys that are gone, each once, and the summary names no
    unrecorded deletion."""
    keys = eligible_world(store, bucket, per_shard=500)
    config = make_config(tmp_path, s3_server, bucket, "delete_concurrency = 1\n")
    with pytest.raises(EpochGCError):
        run_job(
            spark,
            config,
            store,
            s3_server,
            listing_tasks=1,
            on_client_created=FailBeforeDelete(3, "injected crash"),
        )
    gone = set(keys) - l0_left(store)
    assert len(gone) == 2000
    summary = only_summary(store)
    recorded = [row.key for row in deleted_keys(store, ROOT, summary.run_id)]
    assert len(recorded) == len(set(recorded)), "a key recorded twice"
    assert set(recorded) == gone
    assert summary.cause is not None and "unrecorded" not in summary.cause


def test_an_executor_killed_mid_task_loses_at_most_one_chunk_and_the_run_names_it(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    bucket: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A task of 13,000 keys whose Python worker is killed right before its
    13th DeleteObjects (os._exit: no code of the task runs after), 12,000
    keys deleted. The first RECORD_FLUSH_KEYS (10,000) went up as a part
    while it ran; the last 2,000 are in no record, and the task record the
    worker left says so: the summary counts the 12,000, fails naming the
    2,000 unrecorded deletions, and the driver logs it in one WARNING."""
    assert RECORD_FLUSH_KEYS == 10_000, "the figures below are for chunks of 10,000"
    keys = eligible_world(store, bucket, per_shard=1625)
    config = make_config(tmp_path, s3_server, bucket, "delete_concurrency = 1\n")
    with pytest.raises(EpochGCError):
        run_job(
            spark, config, store, s3_server, listing_tasks=1, on_client_created=ExitBeforeDelete(13)
        )
    gone = set(keys) - l0_left(store)
    assert len(gone) == 12_000
    summary = only_summary(store)
    assert not summary.success and summary.deleted == 12_000
    gap = (
        "deletion record incomplete: 2000 deletions unrecorded "
        "(2000 of attempts that never returned)"
    )
    assert summary.cause is not None and summary.cause.endswith(gap)
    recorded = [row.key for row in deleted_keys(store, ROOT, summary.run_id)]
    assert len(recorded) == len(set(recorded)) == 10_000 and set(recorded) <= gone
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    (line,) = [m for m in warnings if m.startswith(f"gc spark {summary.run_id}: {gap}")]
    assert line.endswith("of task 1: gc explain cannot name this run for those keys")


def test_tasks_that_cannot_start_leave_a_failed_record_naming_the_cause(
    spark: Any, tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    eligible_world(store, bucket, per_shard=5)
    config = make_config(tmp_path, s3_server, bucket)
    with pytest.raises(EpochGCError, match="ModuleNotFoundError: No module named 'epochgc'"):
        run_job(spark, config, store, s3_server, listing_tasks=2, on_client_created=FailAtStart())
    summary = only_summary(store)
    assert not summary.success and summary.deleted == 0
    assert summary.cause is not None
    assert "ModuleNotFoundError: No module named 'epochgc'" in summary.cause
    runs = run_cli("gc", "runs", "--config", str(tmp_path / "spark.toml"))
    assert runs.returncode == 0, runs.stderr
    line = next(x for x in runs.stdout.splitlines() if x.startswith(summary.run_id))
    assert "FAILED" in line and "ModuleNotFoundError: No module named 'epochgc'" in line


@pytest.mark.serial
def test_a_memory_error_reading_one_data_file_fails_that_file_not_the_job(
    spark: Any, tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    """The worker reading the first data file runs out of memory (an
    address-space limit, as spark.executor.pyspark.memory sets): that file
    is counted and named in the summary, the other file's keys go."""
    keys = eligible_world(store, bucket, per_shard=100)
    config = make_config(tmp_path, s3_server, bucket)
    # the first file also lists 200k objects elsewhere in the bucket (skipped
    # as outside the root), so reading it takes some memory
    when = datetime(2026, 11, 1, tzinfo=UTC)
    elsewhere = (ObjectInfo(f"elsewhere/{n:08d}", 1, "e", when) for n in range(200_000))
    build_inventory(
        store,
        store,
        inventory_location(config),
        itertools.chain(elsewhere, store.list_objects(f"{ROOT}/l0/")),
        file_format="Parquet",
        rows_per_file=200_400,
    )
    outcome = run_job(
        spark,
        config,
        store,
        s3_server,
        mode="inventory",
        on_client_created=LimitMemory(0, 24 << 20),
    )
    summary = only_summary(store)
    assert outcome.tasks == 2 and summary.errors >= 1 and not summary.success
    assert len(summary.failed_files) == 1
    key, cause = summary.failed_files[0]
    assert key.startswith("inventory/") and "MemoryError" in cause
    assert summary.deleted == len(keys) - 400 == len(keys) - len(l0_left(store))
