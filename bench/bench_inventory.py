"""Planning over an S3 Inventory: the Spark job's stage against a
single-process pyarrow scan, on local disk.

Data: a Parquet inventory in AWS's layout of 5,000,000 rows (L0 keys over
1000 shards and 100 epochs, plus 1% junk keys), in 20 data files. Both
contenders do, for every data file, exactly what an inventory-mode task
does before deleting: read the bytes, check the MD5 against the manifest,
parse and normalise (``read_data_file``), and apply the deletion rule with
Arrow kernels (``select_eligible``, ``M`` = 80). The pyarrow contender
does it file after file in this process; the Spark contender runs one task
per file (``local[2]``, and ``local[1]`` in a child process for the scaling
figure). Each selection is reduced to a digest (row count and MD5 of the
selected keys' bytes) so both must select the same set.

Targets (issue 6): Spark local[2] within 3x of the single-process scan
(time ratio <= 3), and local[2] at least 1.5x its own local[1] rate.

Run from the repository root: ``python -m bench.bench_inventory``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench._harness import figures, setup_logging, verdict
from epochgc.gc.spark.inventory_filter import select_eligible
from epochgc.gc.spark.session import build_spark_session
from epochgc.storage.inventory import (
    PARQUET_SCHEMA,
    InventoryFile,
    InventoryManifest,
    parse_file_schema,
)
from tests.support.inventory_files import read_data_file

ROOT = "epochgc"
SAFE_EPOCH = 80
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
MIN_AGE = timedelta(hours=1)
TARGET_WITHIN = 3.0
TARGET_SCALING = 1.5


def write_inventory(folder: Path, rows: int, files: int, seed: int) -> InventoryManifest:
    """Synthetic Parquet data files and the manifest describing them."""
    rng = random.Random(seed)
    per_file = -(-rows // files)
    entries = []
    for index in range(files):
        n = min(per_file, rows - index * per_file)
        keys = [
            f"{ROOT}/l0/junk-{index}-{i}"
            if rng.random() < 0.01
            else f"{ROOT}/l0/{rng.randrange(1000):03d}/{rng.randrange(100):018d}/"
            f"{uuid.UUID(int=rng.getrandbits(128))}"
            for i in range(n)
        ]
        modified = NOW - timedelta(hours=2)
        table = pa.table(
            {
                "bucket": pa.array(["src"] * n, pa.string()),
                "key": pa.array(keys, pa.string()),
                "size": pa.array([1024] * n, pa.int64()),
                "last_modified_date": pa.array([modified] * n, pa.timestamp("ms", tz="UTC")),
                "e_tag": pa.array(["etag"] * n, pa.string()),
            }
        )
        path = folder / f"part-{index:03d}.parquet"
        pq.write_table(table, path)
        data = path.read_bytes()
        entries.append(InventoryFile(str(path), len(data), hashlib.md5(data).hexdigest()))
    return InventoryManifest(
        key=str(folder / "manifest.json"),
        source_bucket="src",
        destination_bucket="arn:aws:s3:::dst",
        file_format="Parquet",
        columns=parse_file_schema(PARQUET_SCHEMA, "Parquet"),
        files=tuple(entries),
        created_at=NOW,
    )


def plan_file(manifest: InventoryManifest, entry: InventoryFile) -> tuple[int, int, str]:
    """What an inventory task does before deleting; returns (rows read,
    rows selected, digest of the selected keys)."""
    rows = read_data_file(Path(entry.key).read_bytes(), manifest, entry)
    selection = select_eligible(rows, root=ROOT, safe_epoch=SAFE_EPOCH, now=NOW, min_age=MIN_AGE)
    keys = pc.cast(selection.eligible.column("key"), pa.large_string()).combine_chunks()
    digest = hashlib.md5(keys.buffers()[2] or b"").hexdigest() if len(keys) else ""
    return selection.listed, len(keys), digest


def scan_single_process(manifest: InventoryManifest) -> tuple[float, list[tuple[int, int, str]]]:
    started = time.perf_counter()
    results = [plan_file(manifest, entry) for entry in manifest.files]
    return time.perf_counter() - started, results


def scan_spark(spark: Any, manifest: InventoryManifest) -> tuple[float, list[tuple[int, int, str]]]:
    sc = spark.sparkContext
    sc.setJobGroup("bench-inventory", f"plan {len(manifest.files)} inventory files, M={SAFE_EPOCH}")
    files = list(manifest.files)
    # Warm-up, one file per core: the first job pays for starting the
    # Python workers, which later jobs reuse.
    warm = files[: sc.defaultParallelism]
    sc.parallelize(warm, len(warm)).map(lambda e: plan_file(manifest, e)).collect()
    started = time.perf_counter()
    results = sc.parallelize(files, len(files)).map(lambda e: plan_file(manifest, e)).collect()
    return time.perf_counter() - started, results


def spark_only(master: str, manifest_json: str) -> None:
    """Child-process mode: time the Spark scan on ``master`` and print JSON."""
    manifest = _manifest_from_json(manifest_json)
    spark = build_spark_session(master, "bench-inventory", ui=False)
    try:
        seconds, results = scan_spark(spark, manifest)
    finally:
        spark.stop()
    print(json.dumps({"seconds": seconds, "results": results}))


def _manifest_to_json(m: InventoryManifest) -> str:
    return json.dumps({"key": m.key, "files": [[f.key, f.size, f.md5] for f in m.files]})


def _manifest_from_json(text: str) -> InventoryManifest:
    doc = json.loads(text)
    return InventoryManifest(
        key=doc["key"],
        source_bucket="src",
        destination_bucket="arn:aws:s3:::dst",
        file_format="Parquet",
        columns=parse_file_schema(PARQUET_SCHEMA, "Parquet"),
        files=tuple(InventoryFile(k, s, m) for k, s, m in doc["files"]),
        created_at=NOW,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--spark-only", metavar="MASTER", help=argparse.SUPPRESS)
    parser.add_argument("--manifest", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_only:
        spark_only(args.spark_only, args.manifest)
        return 0
    setup_logging()
    with tempfile.TemporaryDirectory(prefix="bench-inventory-") as tmp:
        started = time.perf_counter()
        manifest = write_inventory(Path(tmp), args.rows, args.files, args.seed)
        print(
            f"inventory: {args.rows} rows in {args.files} Parquet files "
            f"({sum(f.size for f in manifest.files) / 1e6:.0f} MB), "
            f"written in {time.perf_counter() - started:.0f}s; M={SAFE_EPOCH}"
        )
        single_seconds, single = scan_single_process(manifest)
        spark = build_spark_session("local[2]", "bench-inventory", ui=False)
        try:
            spark2_seconds, spark2 = scan_spark(spark, manifest)
        finally:
            spark.stop()
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.bench_inventory",
                "--spark-only",
                "local[1]",
                "--manifest",
                _manifest_to_json(manifest),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        one = json.loads(child.stdout.strip().splitlines()[-1])
        spark1_seconds = one["seconds"]
        spark1 = [tuple(r) for r in one["results"]]
    rows = sum(r[0] for r in single)
    selected = sum(r[1] for r in single)
    same = single == [tuple(r) for r in spark2] == spark1
    for name, seconds in (
        ("pyarrow, 1 process", single_seconds),
        ("spark local[2]", spark2_seconds),
        ("spark local[1]", spark1_seconds),
    ):
        print(f"{name:20}: {seconds:6.2f}s = {rows / seconds / 1e6:5.2f} M rows/s")
    print(f"selected {selected} of {rows} rows; same set in all three: {same}")
    within = spark2_seconds / single_seconds
    scaling = spark1_seconds / spark2_seconds
    print(f"spark local[2] time / pyarrow time: {within:.2f} (<= {TARGET_WITHIN:g})")
    print(f"spark local[2] rate / local[1] rate: {scaling:.2f}x (>= {TARGET_SCALING:g})")
    figures(
        f"{rows / spark2_seconds / 1e6:.2f} M rows/s (Spark local[2])",
        f"{rows / single_seconds / 1e6:.2f} M rows/s (pyarrow, 1 process)",
        f"{1 / within:.2f}x; {scaling:.2f}x over local[1]",
    )
    return verdict(
        "inventory",
        f"spark local[2] {within:.2f}x the pyarrow time, {scaling:.2f}x its 1-core rate, "
        f"same selection: {same}",
        f"<= {TARGET_WITHIN:g}x, >= {TARGET_SCALING:g}x, same",
        same and within <= TARGET_WITHIN and scaling >= TARGET_SCALING,
    )


if __name__ == "__main__":
    sys.exit(main())
