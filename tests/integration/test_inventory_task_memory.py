"""An inventory task's memory is bounded by its row batches, not by the
size of the data file it reads (issue 18 point 5): the task runs in this
process (it is a plain function) against the embedded S3 in a process of
its own (so the server's copies of the file do not count), and the peak
resident memory the task adds is compared with the file's size."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from epochgc.gc.spark.tasks import TaskSpec, inventory_task
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.inventory import PARQUET_SCHEMA, InventoryFile, parse_manifest
from epochgc.storage.s3 import S3ObjectStore
from tests.support.peak_rss import peak_rss_growth

ROOT = "epochgc"
ROWS = 600_000


def big_data_file() -> bytes:
    """A Parquet inventory data file of ``ROWS`` random L0 keys (about 30
    MB: random UUIDs do not compress), one in ten at or below M = 10."""
    when = datetime(2026, 11, 1, tzinfo=UTC)
    keys = [
        f"{ROOT}/l0/{i % 1000:03d}/{(5 if i % 10 == 0 else 50):018d}/{uuid.uuid4()}"
        for i in range(ROWS)
    ]
    table = pa.table(
        {
            "bucket": pa.array(["src"] * ROWS),
            "key": pa.array(keys),
            "size": pa.array([100] * ROWS, pa.int64()),
            "last_modified_date": pa.array([when] * ROWS, pa.timestamp("ms", tz="UTC")),
            "e_tag": pa.array(["e"] * ROWS),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=64 * 1024)
    return sink.getvalue()


@pytest.fixture(scope="module")
def s3_elsewhere() -> Iterator[EmbeddedS3]:
    with EmbeddedS3(bucket="memory", in_process=False) as server:
        yield server


@pytest.mark.serial
def test_an_inventory_tasks_memory_does_not_grow_with_its_data_file(
    s3_elsewhere: EmbeddedS3,
) -> None:
    bucket = "memory"
    body = big_data_file()
    key = "inventory/data/big.parquet"
    S3ObjectStore(make_s3_client(s3_elsewhere.client_settings()), bucket).put(key, body)
    doc = {
        "sourceBucket": bucket,
        "destinationBucket": f"arn:aws:s3:::{bucket}",
        "fileFormat": "Parquet",
        "fileSchema": PARQUET_SCHEMA,
        "files": [{"key": "x", "size": 1, "MD5checksum": "0"}],
    }
    manifest = parse_manifest(json.dumps(doc).encode(), "manifest.json")
    spec = TaskSpec(
        client=s3_elsewhere.client_settings(),
        bucket=bucket,
        root=ROOT,
        run_id="memory",
        safe_epoch=10,
        now=datetime(2026, 11, 24, tzinfo=UTC),
        min_age=timedelta(0),
        dry_run=True,
        manifest=manifest,
    )
    entry = InventoryFile(key, len(body), hashlib.md5(body).hexdigest())
    result, growth = peak_rss_growth(lambda: inventory_task(spec, 0, entry))
    assert result.errors == 0 and result.listed == ROWS and result.eligible == ROWS // 10
    # Reading the whole file at once grew the task by 6.6x the file; row
    # batches measure 1.3x to 1.5x run alone, the allocator's pools
    # included, and a CI run saw 2.2x with this test after the rest of the
    # serial part in one process: 3x keeps the margin to both.
    # bench_inventory_memory shows the bound does not move from 5 M to 20 M
    # rows.
    assert growth < 3 * len(body), (
        f"the task's peak memory grew by {growth / len(body):.1f}x its {len(body) >> 20} MiB "
        "data file"
    )
