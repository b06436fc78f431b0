"""The shard sweeper: list each shard in key order, delete what the rule
allows, stop at the first key above ``M``.

Shards are listed in parallel (``shard_concurrency``); eligible keys from
all shards are cut into DeleteObjects batches of up to 1000, with
``delete_concurrency`` batches in flight and the rate set by a
``RateController`` (halved on SlowDown). Per-key errors are retried by the
store and counted here when they persist; nothing is ever retried blindly.

Memory is bounded by the batches in flight, never by the number of keys:
a listing page is judged and dropped; eligible keys wait only in the
current batch (at most 1000) and in the ``2 * delete_concurrency`` batches
queued or in flight. A planning dry run publishes its batches as
``ObjectsPlanned`` (the plan file subscribes and streams them to a file)
instead of deleting them; a counting sweep (the delete-fraction guard)
keeps nothing at all. Each DeleteObjects batch's outcome is published as
``DeleteBatchDone`` (the deletion record and a Spark task's running totals
subscribe); both on the sweeper's ``EventChannel`` (``epochgc.events``).

Stateless on purpose: no cursor is kept. Deleted keys vanish from listings,
so a sweep that crashes or is stopped loses nothing; the next one starts
over and finds only what is left. Two sweepers on the same shards only
repeat each other's (idempotent) deletions.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from epochgc.errors import CollectorPausedError, EpochGCError, TransientStorageError
from epochgc.events import Event, EventChannel
from epochgc.gc.eligibility import Verdict
from epochgc.gc.listing.knowledge import ShardObservation
from epochgc.gc.planner import plan_page
from epochgc.gc.rate import RateController
from epochgc.progress import ProgressLog
from epochgc.runtime import SYSTEM, Executor, Flag, Future, Runtime, StopSignal
from epochgc.storage.keys import l0_shard_prefix, parse_l0_key
from epochgc.storage.object_store import (
    MAX_KEYS_PER_DELETE,
    DeleteOutcome,
    ObjectInfo,
    ObjectStore,
    Throttled,
)

log = logging.getLogger(__name__)

NAMED_UNPARSEABLE = 5
"""How many of the keys that do not parse as L0 keys a run names (in its
summary, ``gc runs`` and its WARNING): enough to recognise whose they are."""


def name_unparseable(named: list[str], keys: Sequence[str]) -> None:
    """Add the first of ``keys`` to ``named`` until it names
    ``NAMED_UNPARSEABLE`` (a sweep's pages, a Spark task's batches, the
    driver's tasks all keep their first few this way)."""
    named.extend(keys[: max(0, NAMED_UNPARSEABLE - len(named))])


@dataclass(frozen=True)
class ObjectsPlanned(Event):
    """A planning dry run's next batch of eligible objects (at most 1000).
    A sweep publishes them one at a time, so a plan file appends them as
    they come; a subscriber's error fails the sweep."""

    objects: tuple[ObjectInfo, ...]


@dataclass(frozen=True)
class DeleteBatchDone(Event):
    """What one DeleteObjects batch did, published from the deleting thread
    after every batch sent (one stopped by a pause too, all empty). The
    deletion record keeps ``deleted``; a Spark task its running totals, so
    a task that dies later does not take its deletions out of the run's
    counts. Several deleting threads publish at once."""

    deleted: tuple[ObjectInfo, ...]
    """The batch's objects whose keys DeleteObjects confirmed, in batch
    order (not the whole batch: a key failing inside the 200 is still
    there)."""
    bytes_deleted: int
    failed_keys: tuple[str, ...]

    @property
    def keys_deleted(self) -> int:
        """Keys deleted: a key sent twice in one batch (an inventory may
        list it twice) is in ``deleted`` twice but deleted, and counted, once."""
        return len({info.key for info in self.deleted})


@dataclass(frozen=True)
class SweepPolicy:
    """How a sweep behaves.

    Attributes:
        min_object_age: objects younger than this are left for a later
            round whatever their epoch (safety margin; 0 allowed).
        shard_concurrency: shards listed at once.
        delete_concurrency: DeleteObjects requests in flight.
        rate_limit_keys_per_second: a hard cap on deletions, or ``None``.
    """

    min_object_age: timedelta = timedelta(hours=1)
    shard_concurrency: int = 8
    delete_concurrency: int = 4
    rate_limit_keys_per_second: float | None = None

    def __post_init__(self) -> None:
        if self.min_object_age < timedelta(0):
            raise ValueError("min_object_age must be >= 0")
        if self.shard_concurrency < 1 or self.delete_concurrency < 1:
            raise ValueError("concurrency must be >= 1")


@dataclass
class SweepResult:
    """What one sweep saw and did."""

    safe_epoch: int
    listed: int = 0
    bytes_listed: int = 0
    eligible: int = 0
    deleted: int = 0
    bytes_deleted: int = 0
    skipped: Counter[Verdict] = field(default_factory=Counter)
    unparseable_keys: list[str] = field(default_factory=list)
    """The first ``NAMED_UNPARSEABLE`` keys that did not parse as L0 keys,
    in the order found (``skipped`` counts them all)."""
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    youngest_too_young: datetime | None = None
    seconds: float = 0.0
    shards: dict[int, ShardObservation] = field(default_factory=dict)
    """What each completely listed shard held (the shard knowledge learns
    from it); a shard stopped early or whose listing failed is absent."""
    failed_shards: set[int] = field(default_factory=set)
    """Shards whose listing or some of whose deletions failed."""
    paused: str | None = None
    """``paused by WHO: REASON`` when a pause stopped the deleting pass (its
    store asks the pause before each DeleteObjects: ``gc.pause``)."""


class Sweeper:
    """Deletes eligible L0 objects shard by shard.

    Example::

        sweeper = Sweeper(store, "epochgc", SweepPolicy(min_object_age=timedelta(0)))
        result = sweeper.sweep(range(16), safe_epoch=80, now=datetime.now(UTC))

    Args:
        store: the bucket.
        runtime: the clocks (its monotonic one paces the delete rate and
            times the sweep), the sleep before a batch the rate has not paid
            for yet, and the listing and deleting workers with their locks:
            the simulation runs a sweep on its virtual time.
        events: where the sweeper publishes ``ObjectsPlanned`` and
            ``DeleteBatchDone``, and where, while it sweeps, its rate
            controller hears the store's ``Throttled``: give ``store`` the
            same channel (default: one of its own, with no subscribers).
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        policy: SweepPolicy,
        *,
        runtime: Runtime = SYSTEM,
        events: EventChannel | None = None,
    ) -> None:
        self._store = store
        self._root = root
        self._policy = policy
        self._runtime = runtime
        self.events = events if events is not None else EventChannel()
        self.rate = RateController(policy.rate_limit_keys_per_second, clock=runtime.monotonic)

    def sweep(
        self,
        shards: Iterable[int],
        safe_epoch: int,
        now: datetime,
        *,
        dry_run: bool = False,
        plan: bool = False,
        full_listing: bool = False,
        expected_deletes: int | None = None,
        stop: StopSignal | None = None,
    ) -> SweepResult:
        """One sweep over ``shards`` with ``M = safe_epoch``.

        Args:
            dry_run: delete nothing; eligible objects are only counted...
            plan: ...unless this is set too: then they are published in
                batches as ``ObjectsPlanned``.
            full_listing: list shards to their end (objects above ``M`` are
                counted, never planned) instead of stopping each shard at
                its first key above ``M``.
            expected_deletes: how many deletions to expect (from a counting
                sweep): the progress line then counts objects, with an ETA.
            stop: once set, the sweep ends after the batches in flight.

        Raises:
            ValueError: ``plan`` without ``dry_run``.
        """
        if plan and not dry_run:
            raise ValueError("a sweep plans only in a dry run")
        shard_list = list(shards)
        run = _SweepRun(self, safe_epoch, now, dry_run, stop or Flag())
        run.full_listing = full_listing
        run.plan = plan
        verb = "delete" if not dry_run else "plan" if plan else "count"
        if expected_deletes is not None and not dry_run:
            run.progress = ProgressLog(
                log,
                f"{verb} M={safe_epoch}",
                expected_deletes,
                unit="objects",
                clock=self._runtime.monotonic,
            )
            run.progress_by_objects = True
        else:
            run.progress = ProgressLog(
                log,
                f"{verb} M={safe_epoch}",
                len(shard_list),
                unit="shards",
                clock=self._runtime.monotonic,
            )
        return self._run(
            run, lambda listers: [listers.submit(run.sweep_shard, s) for s in shard_list]
        )

    def delete_objects(
        self,
        objects: Iterable[ObjectInfo],
        safe_epoch: int,
        *,
        stop: StopSignal | None = None,
    ) -> SweepResult:
        """Delete ``objects``, already judged eligible against ``safe_epoch``
        by the caller (an inventory task's vectorised filter), through the
        same batches, limits and error counting as a sweep. ``objects`` is
        consumed lazily: pass a generator to keep memory bounded."""
        run = _SweepRun(self, safe_epoch, self._runtime.wall(), False, stop or Flag())

        def feed(_listers: Executor) -> list[Future[None]]:
            for info in objects:
                if run.stop.is_set():
                    break
                run.add(info)
            return []

        return self._run(run, feed)

    def _run(
        self,
        run: _SweepRun,
        start: Callable[[Executor], list[Future[None]]],
    ) -> SweepResult:
        runtime = self._runtime
        started = runtime.monotonic()
        # Subscribed for the sweep only: the channel may be the process's,
        # and a new sweeper every round must not pile up on it.
        with self.events.subscribed(Throttled, self._throttled):
            deleters = runtime.executor(self._policy.delete_concurrency, "epochgc-delete")
            listers = runtime.executor(self._policy.shard_concurrency, "epochgc-list")
            try:
                run.deleters = deleters
                for future in start(listers):
                    future.result()
                run.flush()
                run.wait_deletes()
                run.confirm_unanswered()
            finally:
                listers.shutdown(wait=True)
                deleters.shutdown(wait=True)
        run.result.seconds = runtime.monotonic() - started
        return run.result

    def _throttled(self, _event: Throttled) -> None:
        self.rate.on_throttle()


class _SweepRun:
    """Per-sweep mutable state (the ``Sweeper`` itself is reusable)."""

    def __init__(
        self, sweeper: Sweeper, safe_epoch: int, now: datetime, dry_run: bool, stop: StopSignal
    ) -> None:
        runtime = sweeper._runtime
        self.sweeper = sweeper
        self.safe_epoch = safe_epoch
        self.now = now
        self.dry_run = dry_run
        self.stop = stop
        self.result = SweepResult(safe_epoch)
        self.lock = runtime.lock()
        self.batch: list[ObjectInfo] = []
        self.deleters: Executor | None = None
        self.in_flight: list[Future[None]] = []
        self.slots = _Slots(runtime, sweeper._policy.delete_concurrency * 2)
        self.full_listing = False
        self.plan = False
        self.plan_lock = runtime.lock()
        """``ObjectsPlanned`` goes out one at a time (a plan file appends)."""
        self.progress: ProgressLog | None = None
        self.progress_by_objects = False
        self.unanswered: list[list[ObjectInfo]] = []
        """Batches whose DeleteObjects failed with an unknown outcome (it may
        have landed): sent once more at the end (``confirm_unanswered``)."""

    def sweep_shard(self, shard: int) -> None:
        sweeper = self.sweeper
        prefix = l0_shard_prefix(sweeper._root, shard)
        eligible = eligible_bytes = 0
        lowest: int | None = None
        try:
            for page in sweeper._store.list_pages(prefix):
                if self.stop.is_set():
                    return
                plan = plan_page(
                    page,
                    root=sweeper._root,
                    safe_epoch=self.safe_epoch,
                    now=self.now,
                    min_age=sweeper._policy.min_object_age,
                    stop_at_safe_epoch=not self.full_listing,
                )
                self.record_plan(
                    plan.listed,
                    plan.verdicts,
                    plan.youngest_too_young,
                    sum(o.size for o in page[: plan.listed]),
                    plan.unparseable,
                )
                for info in plan.eligible:
                    self.add(info)
                eligible += len(plan.eligible)
                eligible_bytes += sum(info.size for info in plan.eligible)
                if plan.lowest_kept_epoch is not None and (
                    lowest is None or plan.lowest_kept_epoch < lowest
                ):
                    lowest = plan.lowest_kept_epoch
                if plan.stop:
                    break
            if not self.stop.is_set():
                with self.lock:
                    self.result.shards[shard] = ShardObservation(eligible, eligible_bytes, lowest)
        except EpochGCError as err:
            with self.lock:
                self.result.failed_shards.add(shard)
            self.count_error(f"listing shard {shard}: {err}")
        finally:
            if self.progress is not None:
                if self.progress_by_objects:
                    self.progress.advance(0, shards=1)
                else:
                    self.progress.advance(1)

    def record_plan(
        self,
        listed: int,
        verdicts: Counter[Verdict],
        youngest: datetime | None,
        size: int,
        unparseable: Sequence[str] = (),
    ) -> None:
        with self.lock:
            result = self.result
            result.listed += listed
            result.bytes_listed += size
            name_unparseable(result.unparseable_keys, unparseable)
            for verdict, count in verdicts.items():
                if verdict is not Verdict.ELIGIBLE:
                    result.skipped[verdict] += count
            if youngest is not None and (
                result.youngest_too_young is None or youngest > result.youngest_too_young
            ):
                result.youngest_too_young = youngest

    def add(self, info: ObjectInfo) -> None:
        with self.lock:
            self.result.eligible += 1
            if self.dry_run and not self.plan:
                return  # counting only: nothing is kept
            self.batch.append(info)
            if len(self.batch) < MAX_KEYS_PER_DELETE:
                return
            batch, self.batch = self.batch, []
        self.submit(batch)

    def flush(self) -> None:
        with self.lock:
            batch, self.batch = self.batch, []
        if batch:
            self.submit(batch)

    def submit(self, batch: list[ObjectInfo]) -> None:
        if self.stop.is_set():
            return
        if self.dry_run:
            if self.plan:
                with self.plan_lock:
                    self.sweeper.events.publish(ObjectsPlanned(tuple(batch)))
            return
        wait = self.sweeper.rate.reserve(len(batch))
        if wait > 0:
            self.sweeper._runtime.sleep(wait)
        self.slots.acquire()
        assert self.deleters is not None
        future = self.deleters.submit(self.delete, batch)
        with self.lock:
            # Keep only unfinished batches: a sweep of 10^8 keys must not
            # hold 10^5 finished futures. ``result()`` re-raises what
            # ``delete`` did not expect (it counts store errors itself).
            finished: list[Future[None]] = []
            pending = [future]
            for earlier in self.in_flight:
                (finished if earlier.done() else pending).append(earlier)
            self.in_flight = pending
        for done in finished:
            done.result()

    def delete(self, batch: list[ObjectInfo], *, confirming: bool = False) -> None:
        try:
            outcome = self.sweeper._store.delete_batch([info.key for info in batch])
        except CollectorPausedError as err:
            # Paused: this batch was not sent, and no further one goes out
            # (the ones already sent finish). Not an error of the keys.
            self.stop.set()
            with self.lock:
                self.result.paused = self.result.paused or str(err)
            outcome = DeleteOutcome((), {}, 0)
        except TransientStorageError as err:
            if not confirming:
                # It may have landed: its keys may be gone, and only a
                # DeleteObjects answer says which (one for a key already
                # gone says Deleted). Recorded once that answer comes.
                with self.lock:
                    self.unanswered.append(batch)
                return
            outcome = DeleteOutcome((), {info.key: type(err).__name__ for info in batch}, 1)
        except EpochGCError as err:
            outcome = DeleteOutcome((), {info.key: type(err).__name__ for info in batch}, 1)
        finally:
            if not confirming:
                self.slots.release()
        sizes = {info.key: info.size for info in batch}
        size = sum(sizes.get(k, 0) for k in outcome.deleted)
        confirmed = set(outcome.deleted)
        deleted = tuple(info for info in batch if info.key in confirmed)
        with self.lock:
            self.result.deleted += len(outcome.deleted)
            self.result.bytes_deleted += size
        self.sweeper.events.publish(DeleteBatchDone(deleted, size, tuple(outcome.failed)))
        if self.progress is not None:
            if self.progress_by_objects:
                self.progress.advance(len(outcome.deleted))
            else:
                self.progress.advance(0, deleted=len(outcome.deleted))
        if outcome.failed:
            root = self.sweeper._root
            shards = {p.shard for k in outcome.failed if (p := parse_l0_key(k, root)) is not None}
            with self.lock:
                self.result.failed_shards.update(shards)
            for key, code in list(outcome.failed.items())[:3]:
                self.count_error(f"{key}: {code}", count=0)
            with self.lock:
                self.result.errors += len(outcome.failed)
        else:
            self.sweeper.rate.on_success()

    def confirm_unanswered(self) -> None:
        """Send once more, one after another, each batch whose DeleteObjects
        failed with an unknown outcome: the answer confirms the keys the
        lost request deleted (the deletion record lists them) and deletes
        the rest; a batch failing again counts its keys as errors. Nothing
        is sent once the sweep was paused or stopped (counted as errors)."""
        with self.lock:
            batches, self.unanswered = self.unanswered, []
        for batch in batches:
            if self.stop.is_set():
                self.delete_failed(batch, "not confirmed: the sweep stopped")
                continue
            self.delete(batch, confirming=True)

    def delete_failed(self, batch: list[ObjectInfo], why: str) -> None:
        """Count ``batch``'s keys as failed deletes."""
        self.count_error(f"{batch[0].key} and {len(batch) - 1} more: {why}", count=0)
        with self.lock:
            self.result.errors += len(batch)

    def count_error(self, message: str, *, count: int = 1) -> None:
        with self.lock:
            self.result.errors += count
            if len(self.result.error_samples) < 10:
                self.result.error_samples.append(message)
        log.warning("sweep error: %s", message)

    def wait_deletes(self) -> None:
        with self.lock:
            futures = list(self.in_flight)
        for future in futures:
            future.result()


class _Slots:
    """A counting semaphore on the runtime's condition: how many batches
    may be queued or in flight (the feeder waits for a free slot)."""

    def __init__(self, runtime: Runtime, slots: int) -> None:
        self._free = slots
        self._changed = runtime.condition(runtime.lock())

    def acquire(self) -> None:
        with self._changed:
            while self._free == 0:
                self._changed.wait()
            self._free -= 1

    def release(self) -> None:
        with self._changed:
            self._free += 1
            self._changed.notify_all()
