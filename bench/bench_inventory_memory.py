"""Inventory mode's memory does not grow with the inventory (issue 19
point 5, issue 18 point 5).

Two synthetic inventories over Parquet data files of the same size
(``--file-rows`` rows each): ``--small`` rows and ``--large`` rows (5 M and
20 M by default, so 5 and 20 files). Each is run as a dry run of ``gc
spark --mode inventory`` (local[2]) in a fresh process, the embedded S3 in
a process of its own (so its copies of the files count for neither), and
that process prints the peak resident memory of the driver's Python
process while the job runs (reset after the data is generated), of the
driver's JVM, and of the Python workers (the highest peak
a task reported). The Python figures for the two sizes must be within 20%
of each other: the driver holds the manifest, not the rows, and each task
one batch of one file, whatever the number of files. The JVM is printed,
not judged (its heap grows lazily, and it never sees a row).

Run from the repository root: ``python -m bench.bench_inventory_memory``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench._harness import figures, setup_logging, verdict
from epochgc.config import load_config
from epochgc.gc.spark.job import SparkRunOptions, run_spark_gc
from epochgc.gc.spark.session import build_spark_session
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EMBEDDED_ACCESS_KEY, EMBEDDED_SECRET_KEY, EmbeddedS3
from epochgc.storage.inventory import MANIFEST_VERSION, PARQUET_SCHEMA
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.wiring.settings import client_settings_of, inventory_location, spark_gc_settings_of

ROOT = "epochgc"
BUCKET = "inventory-memory"
M = 10
TOLERANCE = 0.20


def data_file(rows: int) -> bytes:
    """One Parquet data file in AWS's inventory schema: random L0 keys,
    one in ten at or below ``M`` (so the dry run's plan is written too)."""
    when = datetime.now(UTC) - timedelta(days=2)
    keys = [
        f"{ROOT}/l0/{i % 1000:03d}/{(5 if i % 10 == 0 else 50):018d}/{uuid.uuid4()}"
        for i in range(rows)
    ]
    table = pa.table(
        {
            "bucket": pa.array([BUCKET] * rows),
            "key": pa.array(keys),
            "size": pa.array([4096] * rows, pa.int64()),
            "last_modified_date": pa.array([when] * rows, pa.timestamp("ms", tz="UTC")),
            "e_tag": pa.array(["etag"] * rows),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=128 * 1024)
    return sink.getvalue()


def write_inventory(store: S3ObjectStore, base: str, body: bytes, files: int) -> None:
    """``files`` data files (the same bytes under different keys: equal
    size by construction) and a checksummed manifest listing them."""
    md5 = hashlib.md5(body, usedforsecurity=False).hexdigest()
    entries = []
    for n in range(files):
        key = f"{base}data/{n:05d}-{uuid.uuid4()}.parquet"
        store.put(key, body)
        entries.append({"key": key, "size": len(body), "MD5checksum": md5})
    manifest = {
        "sourceBucket": BUCKET,
        "destinationBucket": f"arn:aws:s3:::{BUCKET}",
        "version": MANIFEST_VERSION,
        "creationTimestamp": str(int(time.time() * 1000)),
        "fileFormat": "Parquet",
        "fileSchema": PARQUET_SCHEMA,
        "files": entries,
    }
    data = json.dumps(manifest).encode()
    folder = f"{base}{datetime.now(UTC).strftime('%Y-%m-%dT%H-%MZ')}/"
    store.put(f"{folder}manifest.json", data)
    store.put(
        f"{folder}manifest.checksum",
        hashlib.md5(data, usedforsecurity=False).hexdigest().encode(),
    )


def _vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(rows: int, file_rows: int) -> dict[str, Any]:
    """One dry run over ``rows`` rows (in this fresh process)."""
    files = max(1, rows // file_rows)
    with (
        tempfile.TemporaryDirectory(prefix="epochgc-bench-") as tmp,
        EmbeddedS3(bucket=BUCKET, in_process=False) as s3,
    ):
        store = S3ObjectStore(make_s3_client(s3.client_settings()), BUCKET)
        Controller(store, ROOT).advance_to(M)
        config_path = Path(tmp) / "bench.toml"
        config_path.write_text(
            f'[store]\nbucket = "{BUCKET}"\nendpoint_url = "{s3.endpoint_url}"\n'
            f'access_key_id = "{EMBEDDED_ACCESS_KEY}"\n'
            f'secret_access_key = "{EMBEDDED_SECRET_KEY}"\naddressing_style = "path"\n'
            "[gc]\nmin_object_age_seconds = 0.0\n"
        )
        config = load_config(config_path)
        started = time.perf_counter()
        body = data_file(file_rows)
        write_inventory(store, inventory_location(config).base, body, files)
        generated = time.perf_counter() - started
        spark = build_spark_session("local[2]", "epochgc-bench-inventory-memory", ui=False)
        try:
            # the driver's peak from here on: generating the data is not the job's
            gc.collect()
            Path("/proc/self/clear_refs").write_text("5")
            started = time.perf_counter()
            outcome = run_spark_gc(
                spark,
                spark_gc_settings_of(config),
                store,
                RequestStats(),
                client_settings_of(config, s3.endpoint_url),
                SparkRunOptions(mode="inventory", dry_run=True),
            )
            seconds = time.perf_counter() - started
            driver = _vm_hwm(os.getpid())
            gateway = getattr(spark.sparkContext._gateway, "proc", None)
            jvm = _vm_hwm(gateway.pid) if gateway is not None else 0
        finally:
            spark.stop()
    summary = outcome.summary
    return {
        "rows": rows,
        "files": files,
        "file_bytes": len(body),
        "listed": summary.listed,
        "eligible": summary.eligible,
        "errors": summary.errors,
        "generate_seconds": round(generated, 1),
        "job_seconds": round(seconds, 1),
        "driver_python": driver,
        "driver_jvm": jvm,
        "workers": outcome.worker_peak_rss_bytes,
    }


def _child(rows: int, file_rows: int) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.bench_inventory_memory",
            "--child",
            str(rows),
            "--file-rows",
            str(file_rows),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    for line in done.stdout.splitlines():
        if line.startswith("measured "):
            result: dict[str, Any] = json.loads(line.removeprefix("measured "))
            return result
    sys.stderr.write(done.stderr[-4000:])
    raise SystemExit(f"the {rows}-row run printed no figures (exit {done.returncode})")


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=5_000_000)
    parser.add_argument("--large", type=int, default=20_000_000)
    parser.add_argument("--file-rows", type=int, default=1_000_000)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("measured " + json.dumps(measure(args.child, args.file_rows)), flush=True)
        return 0
    setup_logging()
    runs = [_child(rows, args.file_rows) for rows in (args.small, args.large)]
    for r in runs:
        print(
            f"{r['rows']:>11,} rows in {r['files']:>3} files of {_mib(r['file_bytes'])}: "
            f"dry run {r['job_seconds']}s, listed {r['listed']:,}, eligible {r['eligible']:,}, "
            f"errors {r['errors']}; peak RSS driver {_mib(r['driver_python'])} "
            f"(JVM {_mib(r['driver_jvm'])}), workers {_mib(r['workers'])}"
        )
    small, large = runs
    ok = all(r["errors"] == 0 and r["listed"] == r["rows"] for r in runs)
    ratios = {
        name: large[name] / small[name] if small[name] else float("inf")
        for name in ("driver_python", "workers")
    }
    within = all(abs(ratio - 1) <= TOLERANCE for ratio in ratios.values())
    figures(
        f"driver {_mib(large['driver_python'])}, workers {_mib(large['workers'])} at "
        f"{large['rows'] // 10**6}M rows",
        f"driver {_mib(small['driver_python'])}, workers {_mib(small['workers'])} at "
        f"{small['rows'] // 10**6}M rows",
        f"{ratios['driver_python']:.2f}x / {ratios['workers']:.2f}x",
    )
    return verdict(
        "inventory-memory",
        f"peak RSS {large['rows'] // 10**6}M vs {small['rows'] // 10**6}M rows: driver "
        f"{ratios['driver_python']:.2f}x, workers {ratios['workers']:.2f}x",
        f"within {TOLERANCE:.0%}, every row listed, 0 errors",
        ok and within,
    )


if __name__ == "__main__":
    sys.exit(main())
