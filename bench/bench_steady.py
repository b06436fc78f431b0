"""Steady-state collection cost: the cost-aware schedule against today's
fixed-interval sweep, over the same simulated hours of continuous ingest
(issue 19, point 4).

Scenario, on the in-memory store (``epochgc/simulate/memory_store.py``) with a
virtual clock, no HTTP and no sleeping: 1000 shards; writers put ``--rate``
L0 objects a second, each in a random shard, at the current cluster epoch;
the epoch ticks every ``--epoch-seconds``; one topic's node report keeps
``M`` two epochs behind the cluster epoch (the reconciliation lag), so an
epoch becomes eligible two ticks after it began. Both contenders run the
real ``Collector`` rounds (``collect_once``: ``M``, shard discovery,
listing, DeleteObjects, the run summary) at the times the daemon's
``next_round_delay`` picks:

* schedule: ``[gc]``/``[cost]`` defaults, ``gc.max_lag_seconds`` =
  ``--max-lag``: rounds list only the shards due (``gc.listing.schedule``);
* today: every round lists every shard; after a round that deleted
  something the next comes a second later, an idle one waits for the next
  tick (the daemon as it was before the schedule).

Counted: the S3 requests of the collection rounds (what run summaries
record); the writers' PUTs and the daemon's housekeeping (leases, control
and report polls, presence) are outside both. Objects are 64 bytes in
memory; storage dollars are modelled at ``--object-mib`` per object.

The floor. Each shard that receives an object in a lag period must be
listed at least once in that period (an object that becomes eligible just
after a listing waits until the next one), each listing is at least one
LIST page, and the ``N = rate x max_lag`` objects of a period need at least
``ceil(N / 1000)`` DeleteObjects. With objects spread uniformly over ``S``
shards, ``S (1 - exp(-N / S))`` shards receive one in a period (all of them
at steady ingest). Per 1000 objects reclaimed:

    floor = (S (1 - exp(-N / S)) + ceil(N / 1000)) / N * 1000

(at 10 objects/s, 1 h, 1000 shards: 1036 requests per 36,000 objects, 28.8
per 1000). Listing more often than ``max_lag`` can only pay when the
economic interval ``T* = sqrt(2 L / (s r))`` (``gc.listing.cost``) is shorter, i.e.
at tens of MB/s per shard; the benchmark prints ``T*`` for its ingest. The
floor's dollars are its LISTs and DeleteObjects at the ``[cost]`` prices
plus the storage of eligible bytes waiting half a lag period on average.

With sparse ingest (``--rate 0.2``: most shards empty most of the time)
the schedule stays near this floor, but today's sweep lists only the few
shards present, so the ">= 10x fewer than today" target, set for steady
ingest into every shard, is not met there and says nothing about it.

Measured from the end of the first hour (``--warmup``: both contenders
start by listing everything once) to the end. Targets: requests per 1000
reclaimed within 1.5x of the floor, >= 10x fewer requests per 1000 than
today, and no eligible object waiting longer than ``max_lag``.

Run from the repository root: ``python -m bench.bench_steady``.
"""

from __future__ import annotations

import argparse
import logging
import math
import random
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bench._harness import figures, setup_logging, verdict
from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import Collector, RoundOutcome, ScheduleSettings, next_round_delay
from epochgc.gc.listing.cost import GB, Prices, economic_interval_seconds
from epochgc.gc.listing.schedule import ListingPolicy
from epochgc.runtime import Runtime
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.storage.keys import encode_l0_key, l0_prefix
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    publish_report,
)

log = logging.getLogger("epochgc.bench.steady")

ROOT = "steady"
SHARDS = 1000
LAG_EPOCHS = 2
BODY = b"x" * 64


@dataclass
class Figures:
    """What one contender did in the measured window."""

    name: str
    requests: Counter[str] = field(default_factory=Counter)
    deleted: int = 0
    rounds: int = 0
    max_lag_seconds: float = 0.0
    waiting_byte_seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def per_1000(self) -> float:
        return self.total / self.deleted * 1000 if self.deleted else math.inf

    def dollars(self, prices: Prices) -> float:
        return (
            prices.request_cost(self.requests)
            + self.waiting_byte_seconds * prices.storage_per_byte_second
        )


class World:
    """The bucket, the clock, the controller and the writers."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.clock = VirtualClock()
        self.store = MemoryStore(self.clock)
        self.controller = Controller(self.store, ROOT, runtime=Runtime(wall=self.clock.now))
        self.rng = random.Random(19)
        self.remaining: dict[int, set[str]] = {}
        """Keys written and not yet deleted, by epoch."""
        self.eligible_at: dict[int, float] = {}
        self.waiting = 0
        """Eligible objects not yet deleted."""
        self.controller.tick()
        self.revision = self.controller.create_topic("steady", 1).revision
        for _ in range(LAG_EPOCHS + 1):
            self.tick()

    @property
    def epoch(self) -> int:
        return self.controller.current_epoch()

    def tick(self) -> None:
        epoch = self.controller.tick()
        safe = max(self.revision - 1, epoch - LAG_EPOCHS)
        publish_report(
            self.store,
            ROOT,
            NodeReport(
                "node-1",
                self.clock.now(),
                (PartitionReport("steady", self.revision, 0, 1, safe, 0, epoch, epoch - 1),),
            ),
        )
        if safe not in self.eligible_at and safe in self.remaining:
            self.eligible_at[safe] = self.clock.monotonic()
            self.waiting += len(self.remaining[safe])

    def write(self, count: int) -> None:
        epoch = self.epoch
        keys = self.remaining.setdefault(epoch, set())
        for _ in range(count):
            object_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            key = encode_l0_key(ROOT, self.rng.randrange(SHARDS), epoch, object_id)
            self.store.put(key, BODY)
            keys.add(key)

    def settle(self, figures: Figures | None) -> None:
        """After a round: which eligible objects are gone, and how long the
        last of each epoch waited."""
        now = self.clock.monotonic()
        live = {info.key for info in self.store.list_objects(l0_prefix(ROOT))}
        for epoch, became in list(self.eligible_at.items()):
            keys = self.remaining.get(epoch, set())
            gone = keys - live
            if not gone:
                continue
            keys -= gone
            self.waiting -= len(gone)
            if figures is not None:
                figures.max_lag_seconds = max(figures.max_lag_seconds, now - became)
            if not keys:
                del self.remaining[epoch]
                del self.eligible_at[epoch]

    def oldest_waiting(self) -> float:
        now = self.clock.monotonic()
        return max((now - at for at in self.eligible_at.values()), default=0.0)


def run(name: str, args: argparse.Namespace, scheduled: bool) -> Figures:
    world = World(args)
    max_lag = args.max_lag
    listing = ListingPolicy(max_lag_seconds=max_lag) if scheduled else None
    settings = CollectSettings(
        min_object_age=timedelta(0),
        max_delete_fraction=1.0,
        shard_concurrency=1,
        delete_concurrency=1,
        listing=listing,
    )
    collector = Collector(world.store, RequestStats(), ROOT, settings, now=world.clock.now)
    schedule = ScheduleSettings(
        interval=timedelta(seconds=args.round_seconds),
        epoch_interval=timedelta(seconds=args.epoch_seconds),
        scheduled_idle=timedelta(seconds=max(args.round_seconds, max_lag / 12)),
    )
    figures = Figures(name)
    start = world.clock.monotonic()
    end = start + args.hours * 3600
    warmup_end = start + args.warmup
    next_round = start
    next_tick = start + args.epoch_seconds
    tick_started: datetime = world.clock.now()
    carry = 0.0
    last_progress = time.monotonic()
    while world.clock.monotonic() < end:
        now = world.clock.monotonic()
        measuring = now >= warmup_end
        if now >= next_tick:
            world.tick()
            tick_started = world.clock.now()
            next_tick += args.epoch_seconds
        if now >= next_round:
            before = Counter(dict(_by_operation(world.store)))
            report = collector.run_round()
            spent = Counter(dict(_by_operation(world.store)))
            spent.subtract(before)
            collected = report.collected
            if measuring:
                figures.requests.update(+spent)
                figures.rounds += 1
            if collected is not None and collected.summary.deleted:
                if measuring:
                    figures.deleted += collected.summary.deleted
                world.settle(figures if measuring else None)
            delay = next_round_delay(
                report.outcome,
                schedule,
                now=world.clock.now(),
                min_object_age=timedelta(0),
                youngest_too_young=None,
                epoch_started_at=tick_started,
                next_listing_at=collected.next_listing_at if collected else None,
            )
            if report.outcome is RoundOutcome.FAILED:
                raise SystemExit(f"{name}: a round failed: {report.error}")
            next_round = now + max(1.0, delay.total_seconds())
        carry += args.rate
        world.write(int(carry))
        carry -= int(carry)
        if measuring:
            figures.waiting_byte_seconds += world.waiting * args.object_mib * 2**20
        world.clock.advance(1.0)
        if time.monotonic() - last_progress > 10:
            last_progress = time.monotonic()
            log.info(
                "%s: %.0f of %.0f simulated minutes", name, (now - start) / 60, args.hours * 60
            )
    figures.max_lag_seconds = max(figures.max_lag_seconds, world.oldest_waiting())
    return figures


def _by_operation(store: MemoryStore) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for (operation, _prefix), count in store.requests.items():
        totals[operation] += count
    return dict(totals)


def floor_per_1000(args: argparse.Namespace) -> tuple[float, float]:
    """The floor's requests per 1000 reclaimed, and its dollars per hour."""
    per_period = args.rate * args.max_lag
    deletes = math.ceil(per_period / 1000)
    listings = SHARDS * (1 - math.exp(-per_period / SHARDS))
    requests = listings + deletes
    prices = Prices()
    period_dollars = (
        prices.price_of("ListObjectsV2") * listings + prices.price_of("DeleteObjects") * deletes
    )
    waiting = args.rate * args.object_mib * 2**20 * args.max_lag / 2  # bytes, on average
    period_dollars += waiting * args.max_lag * prices.storage_per_byte_second
    return requests / per_period * 1000, period_dollars * 3600 / args.max_lag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=4.0, help="simulated hours")
    parser.add_argument("--warmup", type=float, default=3600.0, help="seconds not measured")
    parser.add_argument("--rate", type=float, default=10.0, help="L0 objects written per second")
    parser.add_argument("--object-mib", type=float, default=8.0, help="modelled object size")
    parser.add_argument("--max-lag", type=float, default=3600.0, help="gc.max_lag_seconds")
    parser.add_argument("--epoch-seconds", type=float, default=60.0)
    parser.add_argument("--round-seconds", type=float, default=60.0, help="daemon interval")
    args = parser.parse_args(argv)
    setup_logging()
    prices = Prices()
    measured_hours = (args.hours * 3600 - args.warmup) / 3600
    started = time.monotonic()
    ours = run("schedule", args, scheduled=True)
    today = run("today", args, scheduled=False)
    floor, floor_dollars = floor_per_1000(args)
    per_shard_rate = args.rate * args.object_mib * 2**20 / SHARDS
    print(
        f"ingest {args.rate:g} objects/s of {args.object_mib:g} MiB over {SHARDS} shards "
        f"({per_shard_rate / 2**20:.3f} MiB/s per shard: T* = "
        f"{economic_interval_seconds(per_shard_rate, prices):.0f}s), max lag {args.max_lag:.0f}s, "
        f"{measured_hours:.1f} h measured after {args.warmup:.0f}s of warm-up "
        f"({time.monotonic() - started:.0f}s of real time)"
    )
    print(
        f"{'':10} {'rounds':>7} {'requests':>9} {'reclaimed':>10} {'per 1000':>9} "
        f"{'$/hour':>9} {'$/GB':>9} {'max lag s':>10}"
    )
    for f in (ours, today):
        dollars = f.dollars(prices)
        gb = f.deleted * args.object_mib * 2**20 / GB
        print(
            f"{f.name:10} {f.rounds:>7} {f.total:>9} {f.deleted:>10} {f.per_1000():>9.1f} "
            f"{dollars / measured_hours:>9.4f} {dollars / gb if gb else math.inf:>9.5f} "
            f"{f.max_lag_seconds:>10.0f}"
        )
        print(f"{'':10} requests: {dict(sorted(f.requests.items()))}")
    print(f"{'floor':10} {'':>7} {'':>9} {'':>10} {floor:>9.1f} {floor_dollars:>9.4f}")
    to_floor = ours.per_1000() / floor
    fewer = today.per_1000() / ours.per_1000()
    passed = (
        to_floor <= 1.5
        and fewer >= 10
        and ours.max_lag_seconds <= args.max_lag
        and ours.deleted > 0
    )
    figures(f"{ours.per_1000():.1f} req/1000", f"{today.per_1000():.1f} req/1000", f"{fewer:.0f}x")
    return verdict(
        "steady",
        f"{to_floor:.2f}x the floor ({floor:.1f} req/1000), {fewer:.0f}x fewer requests than "
        f"today, max lag {ours.max_lag_seconds:.0f}s",
        f"<= 1.5x floor, >= 10x fewer, lag <= {args.max_lag:.0f}s",
        passed,
    )


if __name__ == "__main__":
    sys.exit(main())
