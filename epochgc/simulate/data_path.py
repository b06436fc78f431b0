"""The data path of the simulated cluster: one or two producers (from
the seed) writing shared L0 objects and registering each partition's
chunk with its leader, and a
collector computing ``M`` and deleting what it allows, all on the
product's own code (``Controller``, ``upload_l0``, ``TermWriter.submit``,
``collect_once``), plus the ghost record of what must never be lost. (The
epoch ticker runs in every node, as ``[epoch] ticker = true`` has it:
``cluster.SimNode``.)

Each is one simulated process with one task, the thin shell around the
step the product takes:

* a producer: every ``PRODUCE_SECONDS``, read the cluster epoch
  through an ``EpochCache`` (its TTL, 0 to 30 s, drawn from the seed: a
  stale epoch is what the partitions' windows must judge), upload one L0
  object holding a chunk for one to three partitions
  (``upload_l0``), then hand each chunk to the process leading its
  partition (a request to that process: it runs ``TermWriter.submit`` there
  and answers once the placeholder is applied or rejected); a chunk with
  no leader, a stale epoch or no answer is not acknowledged, and its
  object is an orphan for the collector, as in production (a stale epoch
  also drops the cached one); a ``producer_stall`` fault stops it for a
  while between an upload and its placeholders, so they reach the leaders
  at an epoch their windows may have left;
* the collector: every ``COLLECT_SECONDS``, ``gc collect``'s round
  (``collect_once``: ``M`` from the controller and the node reports, every
  shard present listed by the sweeper's workers, the eligible keys
  deleted through the pause guard, the deletion record and the summary
  written); its own invariants are ``simulate/collector_ghost.py``'s. A
  seed runs one collector or two (``Scenario.collectors``), each with its
  own tracker, janitor and compaction, their rounds out of phase: two
  daemons that each believe they lead the GC (one paused past its lease),
  or an operator's ``gc collect`` beside the daemon.

The ghost (``DataGhost``) knows, from the leaders' side, every placeholder
a leader applied (its records are then promised to readers) and, from the
bucket's side, every L1 object that landed. Its invariants:

* ``deleted too soon``: when the deletion of an L0 object reaches the
  bucket, every applied record in it is already in a landed L1 object;
* ``M fell``: a collector's join of the reports never computes an ``M``
  below one it computed before (a node carries the entries of partitions
  it no longer leads until a newer leader's report covers them, so a
  failover or a hand-back never makes a partition count as
  ``revision - 1``; the tracker would keep the higher ``M``, but a fresh
  collector would not have it);
* ``record lost`` (after the heal phase): every applied record is readable,
  from L1 or from an L0 object still there;
* ``M stalled`` (after the heal phase): the collector's ``M`` has passed
  the cluster epoch of the moment the faults stopped;
* ``not collected`` (after the heal phase): no L0 object is left whose
  epoch is at or below an ``M`` the collector used two rounds before the
  end and whose stamp was older than that round (it lists every shard
  each round, so it had the chance twice; an object stamped by a gateway
  whose clock runs ahead looks too young until its stamp has passed).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from epochgc.errors import CollectorPausedError, EpochGCError
from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.control import DeletingJob
from epochgc.gc.daemon.maintenance import CompactionJob
from epochgc.gc.janitor import Janitor
from epochgc.gc.pause import GuardedStore, PauseGuard
from epochgc.ingest.upload import upload_l0
from epochgc.reconciler.topics import epochgc_partitions
from epochgc.runtime import Runtime
from epochgc.simulate.simulated_store import EPOCH_ORIGIN
from epochgc.simulate.virtual_time import Process
from epochgc.storage.keys import (
    PartitionId,
    l0_prefix,
    parse_l0_key,
    parse_l1_key,
)
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.epoch import EpochCache
from epochgc.watermarks.partition.commands import Placeholders
from epochgc.watermarks.partition.state import Outcome
from epochgc.watermarks.safe_epoch.aggregate import SafeEpochTracker

if TYPE_CHECKING:
    from epochgc.simulate.cluster import World

TICK_SECONDS = 5.0
"""The nodes' ``[epoch] interval_seconds``."""
MAX_EPOCH_CACHE_SECONDS = 30.0
PRODUCE_SECONDS = 2.0
COLLECT_SECONDS = 10.0
JANITOR_EVERY_ROUNDS = 3
"""The collector's round passes its janitor every third round (the
daemon: every ``maintenance_interval_seconds``)."""
COMPACT_EVERY_ROUNDS = 6
COMPACT_MIN_ENTRIES = 8
"""After every sixth round the collector compacts the controller log
when 8 entries or more are above its snapshot (the daemon's ``compact``
job, ``[compaction] min_entries``): a snapshot and a truncation every
minute or so, so that late writes land in truncated slots."""
SHARDS = 4
APPEND_ANSWER_SECONDS = 10.0
"""How long the producer waits for a leader's answer before giving up on
the chunk (it is then not acknowledged)."""


@dataclass
class _Coverage:
    """Record offsets of one partition that landed in L1, as sorted,
    disjoint, inclusive ranges."""

    ranges: list[tuple[int, int]] = field(default_factory=list)

    def add(self, first: int, last: int) -> None:
        merged = [*self.ranges, (first, last)]
        merged.sort()
        out: list[tuple[int, int]] = []
        for lo, hi in merged:
            if out and lo <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], hi))
            else:
                out.append((lo, hi))
        self.ranges = out

    def covers(self, first: int, last: int) -> bool:
        index = bisect.bisect_right(self.ranges, (first, float("inf"))) - 1
        return index >= 0 and self.ranges[index][0] <= first and last <= self.ranges[index][1]


@dataclass(frozen=True)
class AppliedChunk:
    """Records ``first..last`` of a partition, in one L0 object, applied by
    a leader: promised to readers from then on."""

    pid: PartitionId
    first: int
    last: int
    l0_key: str
    leader: str


class DataGhost:
    """What must never be lost, known to no process (module docstring)."""

    def __init__(
        self,
        root: str,
        violation: Callable[[str, str], BaseException],
        *,
        ended: Callable[[PartitionId], bool],
    ) -> None:
        self._root = root
        self._violation = violation
        self._ended = ended
        """Whether a partition's topic incarnation was ended by a delete that
        named it: its records are then no longer promised to anyone."""
        self.applied: dict[str, list[AppliedChunk]] = {}
        """L0 key -> the applied chunks in it."""
        self.l1: dict[PartitionId, _Coverage] = {}
        self.deleted_l0 = 0
        self.chunks = 0
        self.rounds: list[tuple[float, int]] = []
        """(virtual time, ``M``) of each collector round that computed one."""
        self.epoch_at_faults_end: int | None = None

    def collector_round(self, at: float, safe_epoch: int) -> None:
        self.rounds.append((at, safe_epoch))

    def m_fell(self, collector: str, used: int) -> None:
        """A join of ``collector`` computed an ``M`` below the ``used`` one
        it had computed before (its tracker kept the higher)."""
        raise self._violation(
            "M fell",
            f"{collector} computed M below the M = {used} it had already used: some "
            "partition's entry went missing from the reports or moved back",
        )

    def faults_ended(self, epoch: int) -> None:
        self.epoch_at_faults_end = epoch

    def chunk_applied(self, chunk: AppliedChunk) -> None:
        self.applied.setdefault(chunk.l0_key, []).append(chunk)
        self.chunks += 1

    def landed(self, key: str) -> None:
        """A write that reached the bucket: L1 objects count as durable."""
        parsed = parse_l1_key(key, self._root)
        if parsed is None:
            return
        pid = PartitionId(parsed.topic, parsed.revision, parsed.partition)
        self.l1.setdefault(pid, _Coverage()).add(parsed.first_offset, parsed.last_offset)

    def in_l1(self, chunk: AppliedChunk) -> bool:
        coverage = self.l1.get(chunk.pid)
        return coverage is not None and coverage.covers(chunk.first, chunk.last)

    def deleted(self, keys: tuple[str, ...], by: str) -> None:
        """A deletion that reached the bucket."""
        for key in keys:
            if parse_l0_key(key, self._root) is None:
                continue
            self.deleted_l0 += 1
            for chunk in self.applied.get(key, ()):
                if not self.in_l1(chunk) and not self._ended(chunk.pid):
                    raise self._violation(
                        "deleted too soon",
                        f"{by} deleted {key} while records {chunk.first}..{chunk.last} of "
                        f"{chunk.pid} in it (applied by {chunk.leader}) were not in L1",
                    )

    def check_readable(self, exists: Callable[[str], bool]) -> None:
        """After the heal phase: every applied record can still be read."""
        for key, chunks in self.applied.items():
            for chunk in chunks:
                if not self.in_l1(chunk) and not self._ended(chunk.pid) and not exists(key):
                    raise self._violation(
                        "record lost",
                        f"records {chunk.first}..{chunk.last} of {chunk.pid} (applied by "
                        f"{chunk.leader}) are in no L1 object and {key} is gone",
                    )

    def check_collected(self, bucket: ObjectStore, now: float) -> None:
        """After the heal phase: ``M`` moved past the epoch the faults
        ended at, and every object at or below an ``M`` used two rounds
        ago is gone."""
        if self.epoch_at_faults_end is not None:
            latest = self.rounds[-1][1] if self.rounds else None
            if latest is None or latest < self.epoch_at_faults_end:
                raise self._violation(
                    "M stalled",
                    f"the collector's M is {latest} after the heal phase, below epoch "
                    f"{self.epoch_at_faults_end} of the moment the faults stopped",
                )
        settled = [(at, m) for at, m in self.rounds if at <= now - 2 * COLLECT_SECONDS - 1.0]
        if not settled:
            return
        at, bound = settled[-1]
        # Stamped by a gateway whose clock runs ahead, an object looks
        # younger than it is (min_age is 0 here): only one stamped before
        # that round is owed.
        stamped_before = EPOCH_ORIGIN + timedelta(seconds=at - 2.0)
        for info in bucket.list_objects(l0_prefix(self._root)):
            parsed = parse_l0_key(info.key, self._root)
            if (
                parsed is not None
                and parsed.epoch <= bound
                and info.last_modified <= stamped_before
            ):
                raise self._violation(
                    "not collected",
                    f"{info.key} (stamped {info.last_modified:%H:%M:%S}) "
                    f"is still there, though the collector had M = {bound} at {at:.1f}, two "
                    "rounds before the end",
                )


class _PeriodicRole:
    """A data-path process: its step every ``every`` seconds; a step that
    fails is noted and the next one runs, as the production loops do."""

    every = 1.0
    failure = "step failed"

    def __init__(self, world: World, runtime: Runtime, store: ObjectStore, process: Process):
        self.process = process
        self._world = world
        self._runtime = runtime
        self._store = store
        self._controller = Controller(store, world.root, runtime=runtime)

    def run(self) -> None:
        while True:
            self._runtime.sleep(self.every)
            try:
                self.step()
            except EpochGCError as err:
                self._world.note(f"{self.failure}: {err}")

    def step(self) -> None:
        raise NotImplementedError


class SimProducer(_PeriodicRole):
    """One producer process (module docstring)."""

    every = PRODUCE_SECONDS
    failure = "producer: batch failed"

    def __init__(self, world: World, runtime: Runtime, store: ObjectStore, process: Process):
        super().__init__(world, runtime, store, process)
        ttl = runtime.unit_random() * MAX_EPOCH_CACHE_SECONDS
        self._epochs = EpochCache(self._controller.current_epoch, ttl_seconds=ttl, runtime=runtime)
        self._sequence = 0
        self._stall_seconds = 0.0

    def stall_after_next_upload(self, seconds: float) -> None:
        """``producer_stall``: the next batch's placeholders go out
        ``seconds`` after its L0 object landed, at the epoch the object was
        written at (a stop between the two steps: a stop-the-world pause of the
        runtime, a stalled connection to the leader)."""
        self._stall_seconds = seconds

    def step(self) -> None:
        view = self._controller.snapshot()
        partitions = sorted(epochgc_partitions(view.topics), key=str)
        if not partitions:
            return
        picked = sorted(
            {partitions[int(self._runtime.unit_random() * len(partitions))] for _ in range(3)},
            key=str,
        )
        epoch = self._epochs.get()
        chunks = []
        for pid in picked:
            self._sequence += 1
            count = 1 + int(self._runtime.unit_random() * 3)
            records = [f"{pid}/{self._sequence}/{n}".encode() for n in range(count)]
            chunks.append((pid.topic, pid.partition, records))
        uploaded = upload_l0(
            self._store, self._world.root, epoch, chunks, shards=SHARDS, runtime=self._runtime
        )
        if self._stall_seconds:
            stall, self._stall_seconds = self._stall_seconds, 0.0
            self._world.note(f"producer: stalled {stall:.1f}s after {uploaded.key}")
            self._runtime.sleep(stall)
        for pid in picked:
            batch = uploaded.batch_for(pid.topic, pid.partition)
            outcome = self._world.append_at_leader(pid, Placeholders(0, 0, epoch, (batch,)))
            answer = outcome if isinstance(outcome, str) else leader_answer(outcome)
            self._world.note(f"producer: {pid} epoch {epoch} {uploaded.key}: {answer}")
            if outcome is Outcome.REJECTED_STALE_EPOCH:
                self._epochs.invalidate()


class SimCollector(_PeriodicRole):
    """One collector process (module docstring): ``gc collect``'s round,
    ``collect_once``, every ``COLLECT_SECONDS``, as the daemon runs it: its
    tracker, controller and pause guard kept between rounds."""

    every = COLLECT_SECONDS
    failure = "collector: round failed"

    def __init__(self, world: World, runtime: Runtime, store: ObjectStore, process: Process):
        super().__init__(world, runtime, store, process)
        self._tracker = SafeEpochTracker()
        self._guard = PauseGuard(store, world.root, now=runtime.wall)
        self._settings = CollectSettings(
            min_object_age=timedelta(0),
            max_delete_fraction=1.0,
            shard_concurrency=1 + int(runtime.unit_random() * 4),
            delete_concurrency=1 + int(runtime.unit_random() * 3),
        )
        self._janitor = Janitor(GuardedStore(store, self._guard, DeletingJob.JANITOR), world.root)
        # The daemon's compactor: its own controller, deleting through the guard.
        compactor = Controller(
            GuardedStore(store, self._guard, DeletingJob.CONTROLLER_TRUNCATION),
            world.root,
            runtime=runtime,
        )
        self._compact = CompactionJob(
            compactor, self._guard, min_entries=COMPACT_MIN_ENTRIES, leading=lambda: True
        )
        self._rounds = 0

    def step(self) -> None:
        self._world.collector_ghost.round_starts(self.process.name)
        self._rounds += 1
        used, regressions = self._tracker.current, self._tracker.regressions_ignored
        janitor_due = self._rounds % JANITOR_EVERY_ROUNDS == 0
        try:
            outcome = collect_once(
                self._store,
                RequestStats(),
                self._world.root,
                self._settings,
                tracker=self._tracker,
                controller=self._controller,
                guard=self._guard,
                janitor=self._janitor if janitor_due else None,
                runtime=self._runtime,
            )
        except CollectorPausedError as err:
            self._world.note(f"{self.process.name}: {err}")
            return
        if self._tracker.regressions_ignored > regressions and used is not None:
            self._world.data.m_fell(self.process.name, used.safe_epoch)
        summary = outcome.summary
        self._world.collector_ghost.check_record(self.process.name, summary)
        if self._rounds % COMPACT_EVERY_ROUNDS == 0:
            self._compact()
        if outcome.paused is None:
            self._world.data.collector_round(self._world.sched.now, outcome.safe.safe_epoch)
        self._world.note(
            f"{self.process.name}: run {summary.run_id} M={outcome.safe.safe_epoch}, "
            f"deleted {summary.deleted}, errors {summary.errors}"
            + (f", {outcome.paused}" if outcome.paused else "")
        )


def leader_answer(outcome: Outcome) -> str:
    """The producer's view of an applied entry: acknowledged or not."""
    return "acknowledged" if outcome is Outcome.APPLIED else f"not acknowledged ({outcome.value})"
