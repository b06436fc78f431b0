"""DeleteObjects throughput on a real store beside the embedded S3 (moto).

moto answers DeleteObjects from a Python dict; a real store updates a
bucket index for every key, so moto-only figures overstate what a real
store does. This deletes the same N keys (same names, same 1000-key
batches, same requests in flight) from both, through epochgc's
``delete_many``, and prints keys/s and seconds per DeleteObjects request
for each. Seeding (PutObject, a thread pool) is not timed.

The real store is a Ceph RADOS Gateway, found through the ``EPOCHGC_RGW_*``
variables that ``scripts/ceph_rgw.sh start`` prints (``make test-rgw``
runs this after its tests). Without them only moto is measured.

Run from the repository root: ``python -m bench.bench_store_delete [--keys N]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from bench._harness import setup_logging
from epochgc.storage.client import ClientSettings, make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.object_store import MAX_KEYS_PER_DELETE
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore

SEED_THREADS = 16


@dataclass(frozen=True)
class Figure:
    store: str
    keys: int
    seconds: float
    requests: int

    def line(self) -> str:
        rate = self.keys / self.seconds
        per_request = self.seconds / max(self.requests, 1)
        return (
            f"{self.store:<5} {self.keys:>7} keys  {rate:>9.0f} keys/s  "
            f"{self.requests:>4} DeleteObjects  {per_request * 1000:>7.1f} ms wall per request"
        )


def measure(
    name: str, settings: ClientSettings, bucket: str, keys: list[str], inflight: int
) -> Figure:
    """Seed ``keys`` into ``bucket`` (untimed), then time ``delete_many``."""
    client = make_s3_client(settings)
    with ThreadPoolExecutor(SEED_THREADS) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=b"x"), keys))
    stats = RequestStats()
    stats.attach(client)
    store = S3ObjectStore(client, bucket, delete_concurrency=inflight)
    started = time.perf_counter()
    store.delete_many(keys).raise_for_failures()
    seconds = time.perf_counter() - started
    left = sum(1 for _ in store.list_objects("bench/"))
    assert left == 0, f"{name}: {left} keys left after delete_many"
    return Figure(name, len(keys), seconds, stats.by_operation().get("DeleteObjects", 0))


def rgw_settings() -> ClientSettings | None:
    endpoint = os.environ.get("EPOCHGC_RGW_ENDPOINT")
    if not endpoint:
        return None
    return ClientSettings(
        endpoint_url=endpoint,
        access_key_id=os.environ["EPOCHGC_RGW_ACCESS_KEY_ID"],
        secret_access_key=os.environ["EPOCHGC_RGW_SECRET_ACCESS_KEY"],
        addressing_style="path",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--inflight", type=int, default=4, help="DeleteObjects in flight")
    args = parser.parse_args()
    setup_logging()
    keys = [f"bench/{i:08d}-{uuid.uuid4()}" for i in range(args.keys)]
    figures = []
    with EmbeddedS3(bucket="bench-store-delete") as s3:
        figures.append(
            measure("moto", s3.client_settings(), "bench-store-delete", keys, args.inflight)
        )
    rgw = rgw_settings()
    if rgw is not None:
        bucket = f"bench-store-delete-{uuid.uuid4().hex[:8]}"
        client = make_s3_client(rgw)
        client.create_bucket(Bucket=bucket)
        try:
            figures.append(measure("rgw", rgw, bucket, keys, args.inflight))
        finally:
            client.delete_bucket(Bucket=bucket)
    print(f"DeleteObjects of {MAX_KEYS_PER_DELETE} keys each, {args.inflight} in flight:")
    for figure in figures:
        print(figure.line())
    if len(figures) == 2:
        moto, real = figures
        ratio = (moto.keys / moto.seconds) / (real.keys / real.seconds)
        print(f"moto deletes {ratio:.1f}x faster than the RADOS Gateway")
    else:
        print("no EPOCHGC_RGW_ENDPOINT: the RADOS Gateway was not measured (make test-rgw)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
