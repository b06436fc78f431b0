"""A Spark task's share of the deletion record goes up in chunks as it
deletes (issue 39, the deletion record is exact): every RECORD_FLUSH_KEYS
confirmed keys the rows so far become a part of their own, so an executor
killed outright loses at most the last chunk from the record, and the task
record says how many of its deletions are in uploaded parts. The task runs
in this process (it is a plain function) against the embedded S3, its
client watched through its ``ClientCreated`` event; the parts and the task record are the real ones
in the bucket."""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow.parquet as pq
import pytest

from epochgc.events import EventChannel
from epochgc.gc.run_report import new_run_id
from epochgc.gc.spark.job import record_gap
from epochgc.gc.spark.tasks import (
    RECORD_FLUSH_KEYS,
    ClientCreated,
    TaskResult,
    TaskSpec,
    decode_task_record,
    listing_task,
    task_record_key,
)
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key, gc_run_deleted_key
from epochgc.storage.s3 import S3ObjectStore
from tests.conftest import FAST_RETRIES
from tests.support.moto_seed import seed_objects

ROOT = "epochgc"
M = 10
KEYS = 25_000
"""Two and a half chunks of RECORD_FLUSH_KEYS (10,000)."""


@dataclass
class Watch:
    """Hears the task's ``ClientCreated``: counts the keys DeleteObjects confirmed and
    notes each PUT of a deletion record part with the count at that moment.
    The PUT of the part whose name ends with ``fail`` goes to a bucket that
    does not exist (the store refuses it for good)."""

    fail: str | None = None
    confirmed: int = 0
    parts: list[tuple[str, int]] = field(default_factory=list)

    def __call__(self, event: ClientCreated) -> None:
        client = event.client

        def before_delete(params: Any, context: Any, **_kwargs: Any) -> None:
            context["epochgc_keys"] = len(params["Delete"]["Objects"])

        def after_delete(parsed: Any, context: Any, **_kwargs: Any) -> None:
            self.confirmed += context.get("epochgc_keys", 0) - len(parsed.get("Errors", []))

        def before_put(params: Any, **_kwargs: Any) -> None:
            key = params["Key"]
            if "/deleted/" not in key:
                return
            self.parts.append((key, self.confirmed))
            if self.fail is not None and key.endswith(self.fail):
                params["Bucket"] = f"missing-{uuid.uuid4().hex[:12]}"

        client.meta.events.register("before-parameter-build.s3.DeleteObjects", before_delete)
        client.meta.events.register("after-call.s3.DeleteObjects", after_delete)
        client.meta.events.register("before-parameter-build.s3.PutObject", before_put)


@pytest.fixture(autouse=True)
def _task_logging() -> Iterator[None]:
    """A task sets up the ``epochgc`` logger as on an executor; put it back."""
    logger = logging.getLogger("epochgc")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


def watched(watch: Watch) -> EventChannel:
    """The job's channel of task events, ``watch`` on it (the task runs in
    this process: the test sees what ``watch`` counts)."""
    events = EventChannel()
    events.subscribe(ClientCreated, watch)
    return events


def one_shard(bucket: str, count: int) -> set[str]:
    """``count`` eligible keys (epochs 1..M) in shard 0."""
    keys = {encode_l0_key(ROOT, 0, 1 + i % M, str(uuid.uuid4())) for i in range(count)}
    seed_objects(bucket, keys)
    return keys


def run_task(s3_server: EmbeddedS3, bucket: str, watch: Watch) -> tuple[str, TaskResult]:
    """One deleting listing task over shard 0, one DeleteObjects at a time."""
    run_id = new_run_id(datetime.now(UTC))
    spec = TaskSpec(
        client=s3_server.client_settings(),
        bucket=bucket,
        root=ROOT,
        run_id=run_id,
        safe_epoch=M,
        now=datetime.now(UTC),
        min_age=timedelta(0),
        dry_run=False,
        retry=FAST_RETRIES,
        delete_concurrency=1,
        events=watched(watch),
    )
    return run_id, listing_task(spec, 0, [0])


def part_keys(store: S3ObjectStore, key: str) -> list[str]:
    return [str(k) for k in pq.read_table(io.BytesIO(store.get(key).body)).column("key")]


def test_a_part_goes_up_every_record_flush_keys_and_the_parts_hold_every_deletion(
    s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    keys = one_shard(bucket, KEYS)
    watch = Watch()
    run_id, result = run_task(s3_server, bucket, watch)
    assert (result.deleted, result.errors, result.finished) == (KEYS, 0, True)
    assert not list(store.list_objects(f"{ROOT}/l0/"))
    # two parts while it deleted, each once RECORD_FLUSH_KEYS more keys
    # were confirmed, and the rest when it ended
    during = [at for _, at in watch.parts if at < KEYS]
    assert during == [RECORD_FLUSH_KEYS, 2 * RECORD_FLUSH_KEYS]
    names = [key for key, _ in watch.parts]
    assert names == [
        gc_run_deleted_key(ROOT, run_id, 0, result.attempt, chunk) for chunk in range(3)
    ]
    stored = sorted(o.key for o in store.list_objects(f"{ROOT}/gc/runs/{run_id}/deleted/"))
    assert stored == names
    rows = [part_keys(store, key) for key in names]
    assert [len(r) for r in rows] == [RECORD_FLUSH_KEYS, RECORD_FLUSH_KEYS, KEYS - 20_000]
    recorded = [k for r in rows for k in r]
    assert len(recorded) == len(set(recorded)) and set(recorded) == keys
    # the task record counts what is in uploaded parts: nothing is missing
    record = decode_task_record(
        store.get(task_record_key(ROOT, run_id, "delete", 0, result.attempt)).body
    )
    assert result.recorded == record.recorded == record.deleted == KEYS
    assert result.unrecorded() == 0 and record_gap([result], []) is None


def test_a_part_that_cannot_be_uploaded_is_the_tasks_error_and_named_unrecorded(
    s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    """The first part's PUT is refused: the task goes on and ends, one
    error naming that part; its task record says only the last part's
    keys are recorded, and the driver names the rest."""
    one_shard(bucket, 12_000)
    watch = Watch(fail="-00000.parquet")
    run_id, result = run_task(s3_server, bucket, watch)
    assert (result.deleted, result.errors, result.finished) == (12_000, 1, True)
    assert "-00000.parquet: " in result.error_samples[0]
    stored = [o.key for o in store.list_objects(f"{ROOT}/gc/runs/{run_id}/deleted/")]
    assert stored == [gc_run_deleted_key(ROOT, run_id, 0, result.attempt, 1)]
    assert len(part_keys(store, stored[0])) == 2000 == result.recorded
    assert result.unrecorded() == 10_000
    assert record_gap([result], []) == (
        "deletion record incomplete: 10000 deletions unrecorded "
        "(10000 of parts that could not be uploaded)"
    )
