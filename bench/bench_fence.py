"""Epoch fencing: the sliding window against a strict single-epoch fence.

A simulated workload of P producers whose epoch caches lag the cluster epoch
by 0 or 1 while the epoch advances: every request is valid when issued (its
epoch is the current one or the one before). Both designs see the same
request stream in one run:

* window: epochgc's ``EpochFence`` (admits ``[previous, max]``), driven by
  P concurrent asyncio producers;
* strict: only the newest epoch seen is admitted.

A rejection of a valid request is spurious: the producer must refresh its
epoch, and its uploaded L0 object becomes an orphan. Targets (issue 3): zero
spurious rejections with the window, and >= 50,000 fences/s in-process.

Run from the repository root: ``python -m bench.bench_fence``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time

from bench._harness import figures, setup_logging, verdict
from epochgc.errors import StaleEpochError
from epochgc.watermarks.partition.fence import EpochFence
from epochgc.watermarks.partition.window import EpochWindow

TARGET_FENCES_PER_SECOND = 50_000


def make_workload(
    producers: int, epochs: int, requests_per_epoch: int, seed: int
) -> list[list[tuple[int, int]]]:
    """Per epoch step, the shuffled (producer, epoch) requests; each
    producer's cache lags the cluster epoch by 0 or 1."""
    rng = random.Random(seed)
    caches = [1] * producers
    steps = []
    for cluster_epoch in range(2, epochs + 2):
        for p in range(producers):
            if caches[p] < cluster_epoch - 1:
                caches[p] = cluster_epoch - 1  # TTL expired: at most one behind
        requests = []
        for _ in range(requests_per_epoch):
            p = rng.randrange(producers)
            if rng.random() < 0.1:
                caches[p] = cluster_epoch  # this producer's cache refreshes now
            requests.append((p, caches[p]))
        steps.append(requests)
    return steps


class StrictFence:
    """Baseline: admit only the newest epoch seen."""

    def __init__(self, epoch: int) -> None:
        self.newest = epoch

    def admit(self, epoch: int) -> bool:
        if epoch > self.newest:
            self.newest = epoch
        return epoch == self.newest


def run_strict(steps: list[list[tuple[int, int]]]) -> tuple[int, int, float]:
    fence = StrictFence(1)
    rejected = total = 0
    started = time.perf_counter()
    for requests in steps:
        for _p, epoch in requests:
            total += 1
            if not fence.admit(epoch):
                rejected += 1
    return rejected, total, time.perf_counter() - started


async def run_window(steps: list[list[tuple[int, int]]], producers: int) -> tuple[int, int, float]:
    fence = EpochFence(EpochWindow(1, 1))
    rejected = 0
    total = 0

    async def producer(queue: list[int]) -> None:
        nonlocal rejected, total
        for epoch in queue:
            total += 1
            try:
                await fence.acquire(epoch)
            except StaleEpochError:
                rejected += 1
                continue
            await asyncio.sleep(0)  # the append is queued while access is held
            fence.release()

    started = time.perf_counter()
    for requests in steps:
        queues: list[list[int]] = [[] for _ in range(producers)]
        for p, epoch in requests:
            queues[p].append(epoch)
        await asyncio.gather(*(producer(q) for q in queues if q))
    return rejected, total, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--producers", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--requests-per-epoch", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    setup_logging()
    steps = make_workload(args.producers, args.epochs, args.requests_per_epoch, args.seed)
    strict_rejected, strict_total, strict_seconds = run_strict(steps)
    window_rejected, window_total, window_seconds = asyncio.run(run_window(steps, args.producers))
    rate = window_total / window_seconds
    print(f"requests (all valid when issued): {window_total}")
    print(
        f"window fence : {window_rejected:8d} spurious rejections  {rate:12.0f} fences/s "
        f"({args.producers} concurrent producers)"
    )
    print(
        f"strict fence : {strict_rejected:8d} spurious rejections  "
        f"{strict_total / strict_seconds:12.0f} fences/s (no locking, no asyncio)"
    )
    share = strict_rejected / strict_total
    print(f"strict rejects {share:.1%} of valid writes; the window rejects {window_rejected}")
    figures(
        f"{window_rejected} spurious rejections, {rate:,.0f} fences/s",
        f"{strict_rejected} spurious rejections (strict newest-epoch fence)",
        f"{share:.1%} of valid writes saved",
    )
    passed = window_rejected == 0 and rate >= TARGET_FENCES_PER_SECOND
    return verdict(
        "fence",
        f"{window_rejected} spurious rejections (strict: {strict_rejected}), {rate:,.0f} fences/s",
        f"0 spurious, >= {TARGET_FENCES_PER_SECOND:,} fences/s",
        passed,
    )


if __name__ == "__main__":
    sys.exit(main())
