"""Batched deletion through ``ObjectStore`` against a naive per-key loop.

Both contenders delete the same N keys (default 20,000) from the embedded S3
over HTTP, in one run: epochgc's ``delete_many`` (DeleteObjects of up to
1000 keys, a few requests in flight, per-key errors retried) and a loop of
``delete_object`` per key. Seeding goes straight into the in-process backend
and is not timed.

Run from the repository root: ``python -m bench.bench_delete [--keys N]``.

Targets (issue 2): >= 20x the naive loop's keys/s, and <= 1.01 DeleteObjects
requests per 1000 keys.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

from bench._harness import Progress, figures, setup_logging, verdict
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from tests.support.moto_seed import seed_objects

TARGET_RATIO = 20.0
TARGET_REQUESTS_PER_1000 = 1.01


def make_keys(n: int, tag: str) -> list[str]:
    return [f"bench/{tag}/{i:08d}-{uuid.uuid4()}" for i in range(n)]


def remaining(store: S3ObjectStore, prefix: str) -> int:
    return sum(1 for _ in store.list_objects(prefix))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=20_000)
    args = parser.parse_args()
    setup_logging()

    with EmbeddedS3(bucket="bench-delete") as s3:
        client = make_s3_client(s3.client_settings())
        stats = RequestStats()
        stats.attach(client)
        store = S3ObjectStore(client, "bench-delete")

        keys = make_keys(args.keys, "batched")
        seed_objects("bench-delete", keys)
        stats.reset()
        started = time.perf_counter()
        outcome = store.delete_many(keys)
        batched_seconds = time.perf_counter() - started
        batched_requests = stats.by_operation().get("DeleteObjects", 0)
        outcome.raise_for_failures()
        assert remaining(store, "bench/batched/") == 0, "batched delete left keys behind"

        keys = make_keys(args.keys, "naive")
        seed_objects("bench-delete", keys)
        stats.reset()
        progress = Progress("naive delete_object loop", len(keys))
        started = time.perf_counter()
        for done, key in enumerate(keys, start=1):
            client.delete_object(Bucket="bench-delete", Key=key)
            progress.update(done)
        naive_seconds = time.perf_counter() - started
        naive_requests = stats.by_operation().get("DeleteObject", 0)
        assert remaining(store, "bench/naive/") == 0, "naive loop left keys behind"

    n = args.keys
    batched_rate = n / batched_seconds
    naive_rate = n / naive_seconds
    ratio = batched_rate / naive_rate
    per_1000 = batched_requests / (n / 1000)
    naive_per_1000 = naive_requests / (n / 1000)
    print(f"keys deleted per contender : {n}")
    print(f"epochgc delete_many        : {batched_rate:10.0f} keys/s  {per_1000:.2f} req/1000")
    print(f"naive delete_object loop   : {naive_rate:10.0f} keys/s  {naive_per_1000:.2f} req/1000")
    print(f"ratio                      : {ratio:10.1f}x")
    figures(
        f"{batched_rate:.0f} keys/s, {per_1000:.2f} req/1000",
        f"{naive_rate:.0f} keys/s (delete_object loop)",
        f"{ratio:.1f}x",
    )
    passed = ratio >= TARGET_RATIO and per_1000 <= TARGET_REQUESTS_PER_1000
    return verdict(
        "delete",
        f"{ratio:.1f}x naive, {per_1000:.2f} DeleteObjects/1000 keys",
        f">= {TARGET_RATIO:.0f}x, <= {TARGET_REQUESTS_PER_1000}",
        passed,
    )


if __name__ == "__main__":
    sys.exit(main())
