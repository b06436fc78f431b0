"""Opening the controller as a fresh process does: replay from offset 1
against a snapshot plus the tail, on 1,000 / 10,000 / 100,000 entries of
history (one epoch_tick a minute is 525,600 entries a year).

Each size gets its own bucket on the embedded S3 with a history seeded
through the in-process server's backend (PUTs over HTTP run at ~100/s):
topics created and deleted among epoch ticks, one minute apart. Everything
measured goes over HTTP and is counted with ``RequestStats`` (exact):

* replay (the old way): the controller's read loop before snapshots (LIST
  from offset 1, 64 entries a chunk, parallel GETs, fold), reproduced here
  as the baseline;
* snapshot + tail (the new way): the history is compacted first (its
  snapshot written by CAS and the entries it covers deleted, by the
  product's log code), ``--tail`` ticks are appended over HTTP, then a
  fresh ``Controller(...).snapshot()``. Its view must equal the replay's
  plus the tail, and a steady-state ``Controller.compact()`` is measured
  after it.

Targets (the controller-compaction issue): the new way costs <= 10
requests plus the tail at every size, and >= 100x fewer requests than the
replay at 100,000 entries. Seconds are measured, never extrapolated; the
embedded S3 walks the whole bucket on every LIST page (see the notes
in bench_sweep), so the replay's seconds grow faster here than on S3.

Run from the repository root: ``python -m bench.bench_startup``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bench._harness import Progress, figures, setup_logging, verdict
from epochgc.storage.cas_log import ConditionalAppendLog
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import (
    controller_log_prefix,
    controller_snapshot_key,
    encode_log_entry_key,
)
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import (
    CONTROLLER_FIRST_OFFSET,
    SNAPSHOT_CHUNK,
    Controller,
    ControllerView,
    EpochStarts,
    fold_controller,
    snapshot_of,
)
from epochgc.watermarks.controller_codec import (
    ControllerEntry,
    CreateTopic,
    DeleteTopic,
    EpochTick,
    decode_controller_entry,
    encode_controller_entry,
    encode_controller_snapshot,
)

log = logging.getLogger("epochgc.bench.startup")

ROOT = "epochgc"
SIZES = (1_000, 10_000, 100_000)
TARGET_OVERHEAD = 10
TARGET_RATIO = 100.0
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Measure:
    requests: int
    seconds: float
    by_operation: dict[str, int]


@dataclass
class Row:
    size: int
    replay: Measure
    compaction: Measure
    entries_deleted: int
    opened: Measure
    steady_compaction: Measure
    tail: int

    @property
    def ratio(self) -> float:
        return self.replay.requests / self.opened.requests

    @property
    def overhead(self) -> int:
        """Requests of the new way beyond one GET per tail entry."""
        return self.opened.requests - self.tail


def history(size: int) -> list[ControllerEntry]:
    """``size`` entries: a topic created every 500 entries and deleted 250
    later, epoch ticks in between, one minute apart."""
    entries: list[ControllerEntry] = []
    for offset in range(1, size + 1):
        ts = T0 + timedelta(minutes=offset)
        name = f"topic-{offset // 500}"
        if offset % 500 == 1:
            entries.append(CreateTopic(name, 4, {"retention.local.target.ms": 3_600_000}, ts))
        elif offset % 500 == 251:
            entries.append(DeleteTopic(name, ts))
        else:
            entries.append(EpochTick(ts))
    return entries


def seed_history(bucket: str, entries: list[ControllerEntry]) -> None:
    """Write the entries straight into the in-process server (not a public
    moto API: benchmark set-up only)."""
    from moto.s3.models import s3_backends  # noqa: PLC0415 - only with moto running

    from tests.support.moto_seed import MOTO_ACCOUNT_ID  # noqa: PLC0415

    backend = s3_backends[MOTO_ACCOUNT_ID]["aws"]
    prefix = controller_log_prefix(ROOT)
    for offset, entry in enumerate(entries, start=CONTROLLER_FIRST_OFFSET):
        backend.put_object(
            bucket, encode_log_entry_key(prefix, offset), encode_controller_entry(entry)
        )


def counted_store(s3: EmbeddedS3, bucket: str) -> tuple[S3ObjectStore, RequestStats]:
    client = make_s3_client(s3.client_settings())
    stats = RequestStats()
    stats.attach(client)
    return S3ObjectStore(client, bucket), stats


def measure(stats: RequestStats, started: float) -> Measure:
    ops = stats.by_operation()
    return Measure(sum(ops.values()), time.perf_counter() - started, ops)


def replay_from_start(store: S3ObjectStore, expected: int) -> ControllerView:
    """The baseline: ``Controller.snapshot()`` as it was before snapshots
    (read from offset 1 in chunks of 64, fold every entry)."""
    progress = Progress(f"replay of {expected:,} entries", expected, every_seconds=30)
    log_ = ConditionalAppendLog(
        store, controller_log_prefix(ROOT), first_offset=CONTROLLER_FIRST_OFFSET
    )
    view = ControllerView.empty()
    while True:
        read = log_.read(view.offset + 1, limit=SNAPSHOT_CHUNK)
        for entry in read.entries:
            decoded = decode_controller_entry(entry.payload, f"controller entry {entry.offset}")
            view = fold_controller(view, entry.offset, decoded)
        progress.update(view.offset)
        if read.hole is not None or len(read.entries) < SNAPSHOT_CHUNK:
            return view


def first_compaction(store: S3ObjectStore, entries: list[ControllerEntry]) -> int:
    """Snapshot the seeded history (folded here, from the same entries the
    replay read) and truncate what it covers, with the product's log code:
    what ``Controller.compact()`` writes, without replaying the history a
    second time over HTTP. Returns the entries deleted."""
    view, starts = ControllerView.empty(), EpochStarts()
    for offset, entry in enumerate(entries, start=CONTROLLER_FIRST_OFFSET):
        view = fold_controller(view, offset, entry)
        starts.record(offset, entry.ts)
    log_ = ConditionalAppendLog(
        store,
        controller_log_prefix(ROOT),
        first_offset=CONTROLLER_FIRST_OFFSET,
        snapshot_key=controller_snapshot_key(ROOT),
    )
    payload = encode_controller_snapshot(snapshot_of(view, starts))
    log_.write_snapshot(payload, view.offset, log_.read_snapshot())
    return log_.truncate(view.offset + 1)


def run_size(s3: EmbeddedS3, size: int, tail: int) -> Row:
    bucket = f"bench-startup-{size}"
    s3.create_bucket(bucket)
    entries = history(size)
    started = time.perf_counter()
    seed_history(bucket, entries)
    log.info("%d entries seeded in %.1fs", size, time.perf_counter() - started)

    store, stats = counted_store(s3, bucket)
    started = time.perf_counter()
    replayed = replay_from_start(store, size)
    replay = measure(stats, started)
    log.info("replay of %d entries: %d requests, %.1fs", size, replay.requests, replay.seconds)
    if replayed.offset != size:
        raise SystemExit(f"replay stopped at {replayed.offset}, expected {size}")

    stats.reset()
    started = time.perf_counter()
    deleted = first_compaction(store, entries)
    compaction = measure(stats, started)

    writer = Controller(store, ROOT)
    for _ in range(tail):
        writer.tick()

    stats.reset()
    started = time.perf_counter()
    opened_view = Controller(store, ROOT).snapshot()
    opened = measure(stats, started)
    if opened_view.offset != size + tail or opened_view.topics != replayed.topics:
        raise SystemExit(f"snapshot + tail view differs from the replay at {size} entries")
    if opened_view.deleted != fold_deleted(entries):
        raise SystemExit(f"deleted topics differ from the replay's at {size} entries")

    stats.reset()
    started = time.perf_counter()
    steady = Controller(store, ROOT).compact()
    steady_compaction = measure(stats, started)
    if steady.snapshot_offset != size + tail:
        raise SystemExit("the steady-state compaction did not cover the tail")
    return Row(size, replay, compaction, deleted, opened, steady_compaction, tail)


def fold_deleted(entries: list[ControllerEntry]) -> object:
    view = ControllerView.empty()
    for offset, entry in enumerate(entries, start=CONTROLLER_FIRST_OFFSET):
        view = fold_controller(view, offset, entry)
    return view.deleted


def ops(m: Measure) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(m.by_operation.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--tail", type=int, default=10, help="ticks appended after compaction")
    args = parser.parse_args()
    setup_logging()
    rows = []
    with EmbeddedS3(bucket="bench-startup") as s3:
        for size in args.sizes:
            rows.append(run_size(s3, size, args.tail))
    print(f"tail after the snapshot: {args.tail} entries (one GET each in the new way)")
    header = (
        f"{'history':>8} | {'replay req':>10} {'replay s':>9} | {'snap+tail req':>13} "
        f"{'snap+tail s':>11} | {'ratio req':>9} {'ratio s':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.size:>8} | {r.replay.requests:>10} {r.replay.seconds:>9.2f} | "
            f"{r.opened.requests:>13} {r.opened.seconds:>11.3f} | "
            f"{r.ratio:>8.0f}x {r.replay.seconds / r.opened.seconds:>7.0f}x"
        )
    for r in rows:
        print(
            f"{r.size:>8}: replay [{ops(r.replay)}]; snapshot+tail [{ops(r.opened)}]; "
            f"first compaction {r.entries_deleted} entries deleted in {r.compaction.seconds:.1f}s "
            f"[{ops(r.compaction)}]; steady compaction {r.steady_compaction.seconds:.2f}s "
            f"[{ops(r.steady_compaction)}]"
        )
    worst_overhead = max(r.overhead for r in rows)
    largest = max(rows, key=lambda r: r.size)
    figures(
        f"{largest.opened.requests} requests, {largest.opened.seconds:.2f}s "
        f"(snapshot + {args.tail}-entry tail)",
        f"{largest.replay.requests} requests, {largest.replay.seconds:.0f}s (replay)",
        f"{largest.ratio:,.0f}x fewer requests at {largest.size:,} entries",
    )
    passed = worst_overhead <= TARGET_OVERHEAD and (
        largest.size < 100_000 or largest.ratio >= TARGET_RATIO
    )
    return verdict(
        "startup",
        f"snapshot + tail costs at most {worst_overhead} requests plus the tail; "
        f"{largest.ratio:,.0f}x fewer than replay at {largest.size:,} entries",
        f"<= {TARGET_OVERHEAD} + tail at every size, >= {TARGET_RATIO:.0f}x at 100,000",
        passed,
    )


if __name__ == "__main__":
    sys.exit(main())
