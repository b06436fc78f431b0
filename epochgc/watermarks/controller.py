"""The controller log and the cluster epoch (docs/architecture.md,
"The bucket as a database").

The controller log is a conditional-append log of ``create_topic``,
``delete_topic`` and ``epoch_tick`` entries starting at offset 1. The
cluster epoch is the newest offset; a topic's revision is the offset of its
``create_topic`` entry, so every epoch observed after a topic exists is at
least its revision.

``fold_controller`` (pure) turns entries into a ``ControllerView``; the
``Controller`` class does the I/O. Concurrent creators of one name both
append; the first live ``create_topic`` in log order wins and the loser is
told so (``TopicExistsError``), which every reader agrees on.

Compaction (docs/contract.md, "Controller snapshot"): the snapshot
``{root}/meta/controller/snapshot`` holds the fold up to an offset (live
topics, deleted incarnations, the start times of the newest epochs),
written by CAS; entries it covers are then deleted, except the newest
entry, so the cluster epoch (the newest offset) never goes back. Opening
the controller costs the snapshot plus the tail, whatever the history.
Invariants:

* A view is only ever replaced by a snapshot that covers more of the log
  than the view itself (both are folds of the same immutable entries, so
  the snapshot is the view a longer replay would have reached).
* A reader that finds the entries after its view truncated (a hole where it
  starts reading, or an entry gone between LIST and GET) re-reads the
  snapshot, which then covers them: truncation only removes what a snapshot
  covers.
* A reader folds entries only if the snapshot, looked at after they were
  read, does not cover them. A truncated slot takes a late create-only
  write (its slot chosen before the truncation), which only a reader whose
  view ends just below would read, in place of the entry the snapshot
  folded: a missed ``delete_topic`` keeps a deleted incarnation live, a
  missed ``create_topic`` hides a new one whose partitions then pin
  nothing. Snapshots only move forward and truncation follows the snapshot
  that covers it, so a snapshot read after the entries covers every late
  write among them.
* A writer whose ``create_topic`` or ``delete_topic`` landed as such a late
  write (the view does not have it) appends it again.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from epochgc.errors import (
    ConflictError,
    CorruptLogError,
    InvalidArgumentError,
    NotFoundError,
    PreconditionFailedError,
    RetriesExhaustedError,
    TopicExistsError,
    TopicNotFoundError,
)
from epochgc.events import Event, EventChannel
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.cas_log import ConditionalAppendLog, LogEntry, LogSnapshot
from epochgc.storage.keys import (
    PartitionId,
    controller_log_prefix,
    controller_snapshot_key,
    is_valid_topic,
)
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller_codec import (
    ControllerEntry,
    ControllerSnapshot,
    CreateTopic,
    DeletedTopic,
    DeleteTopic,
    EpochTick,
    SnapshotTopic,
    decode_controller_entry,
    decode_controller_snapshot,
    encode_controller_entry,
    encode_controller_snapshot,
)
from epochgc.watermarks.partition.codec import PartitionSnapshot, decode_snapshot, encode_snapshot
from epochgc.watermarks.partition.replica import open_partition_log
from epochgc.watermarks.partition.state import PartitionState
from epochgc.wording import counted

log = logging.getLogger(__name__)

CONTROLLER_FIRST_OFFSET = 1
MAX_PARTITIONS = 100_000


@dataclass(frozen=True)
class TopicInfo:
    """A live topic."""

    name: str
    partitions: int
    revision: int
    config: Mapping[str, Any] = field(default_factory=dict)

    def partition_ids(self) -> list[PartitionId]:
        """Every partition of this incarnation, in order."""
        return [PartitionId(self.name, self.revision, p) for p in range(self.partitions)]

    def partition_id(self, partition: int) -> PartitionId:
        """One partition of this incarnation.

        Raises:
            TopicNotFoundError: ``partition`` is not below the partition count.
        """
        if not 0 <= partition < self.partitions:
            raise TopicNotFoundError(
                f"topic {self.name!r} has partitions 0..{self.partitions - 1}, not {partition}"
            )
        return PartitionId(self.name, self.revision, partition)


@dataclass(frozen=True)
class TopicDeletion:
    """What one writer's ``delete_topic`` did: ``topic@revision`` ended at
    ``deleted_at``; the writer's own entry is at ``entry_offset``. When the
    two differ another writer ended the incarnation first and this writer's
    entry was a no-op."""

    topic: str
    revision: int
    entry_offset: int
    deleted_at: int

    @property
    def by_this_writer(self) -> bool:
        return self.entry_offset == self.deleted_at

    def describe(self) -> str:
        """One line for the operator who asked."""
        if self.by_this_writer:
            return f"deleted {self.topic}@{self.revision} at offset {self.deleted_at}"
        return (
            f"{self.topic}@{self.revision} was already deleted at offset {self.deleted_at} "
            f"by another writer; nothing done (this command's entry is at offset "
            f"{self.entry_offset})"
        )


@dataclass(frozen=True)
class ControllerView:
    """Live topics as of controller offset ``offset`` (the cluster epoch),
    and every deleted topic incarnation, keyed by ``(name, revision)``.

    Deleted incarnations are all kept (a few dozen bytes each; topics are
    deleted by operators, not per minute): a janitor finds in them what to
    clean, and dropping one would orphan its partition logs for good.
    """

    offset: int
    topics: Mapping[str, TopicInfo]
    deleted: Mapping[tuple[str, int], DeletedTopic] = field(default_factory=dict)

    @staticmethod
    def empty() -> ControllerView:
        return ControllerView(CONTROLLER_FIRST_OFFSET - 1, {})

    def live_partitions(self) -> set[PartitionId]:
        """Every partition of every live topic incarnation."""
        return {pid for info in self.topics.values() for pid in info.partition_ids()}


def fold_controller(view: ControllerView, offset: int, entry: ControllerEntry) -> ControllerView:
    """Apply one controller entry at ``offset``. Pure and deterministic.

    A ``create_topic`` of a live name, and a ``delete_topic`` of a name that
    is not live or that names another incarnation than the live one, change
    nothing but the offset (a no-op: the writer finds that its own offset
    is not where the incarnation began or ended).
    """
    topics = view.topics
    deleted = view.deleted
    if isinstance(entry, CreateTopic) and entry.topic not in topics:
        info = TopicInfo(entry.topic, entry.partitions, offset, dict(entry.config))
        topics = {**topics, entry.topic: info}
    elif isinstance(entry, DeleteTopic) and _ends_live_incarnation(view, entry):
        gone = topics[entry.topic]
        topics = {k: v for k, v in topics.items() if k != entry.topic}
        deleted = {
            **deleted,
            (gone.name, gone.revision): DeletedTopic(gone.name, gone.revision, offset),
        }
    return ControllerView(offset, topics, deleted)


def _ends_live_incarnation(view: ControllerView, entry: DeleteTopic) -> bool:
    """Whether ``entry`` ends the live incarnation of its name: the one it
    names, or (an entry written before deletes named one) whichever is live."""
    live = view.topics.get(entry.topic)
    return live is not None and entry.revision in (None, live.revision)


DEFAULT_EPOCH_HISTORY = 10_000
"""Epoch start times kept (about a week of one-minute ticks)."""


class EpochStarts:
    """When the newest epochs began, bounded to ``capacity`` epochs. Pure.

    Retention ages records by their epoch's start. Keeping every epoch would
    grow by one entry a minute forever, so only the newest ``capacity`` are
    kept; for an older epoch ``started_at`` answers the latest start among
    the epochs dropped: an upper bound of its true start (it began before
    them), so an age computed from it is never overstated and retention
    never drops a record early. It may keep one longer than asked.

    Example::

        starts = EpochStarts(capacity=2)
        for epoch, ts in ((1, t1), (2, t2), (3, t3)):
            starts.record(epoch, ts)
        starts.started_at(3)  # t3
        starts.started_at(1)  # t1 (the latest start dropped: an upper bound)
    """

    def __init__(
        self,
        capacity: int = DEFAULT_EPOCH_HISTORY,
        starts: Sequence[tuple[int, datetime]] = (),
        older_started_by: datetime | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"epoch history must be >= 1, got {capacity}")
        self._capacity = capacity
        self._starts: OrderedDict[int, datetime] = OrderedDict()
        self._older_started_by = older_started_by
        for epoch, started in starts:
            self.record(epoch, started)

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def older_started_by(self) -> datetime | None:
        """Every epoch below the kept ones started at or before this."""
        return self._older_started_by

    def items(self) -> tuple[tuple[int, datetime], ...]:
        """The kept ``(epoch, started_at)``, ascending."""
        return tuple(self._starts.items())

    def record(self, epoch: int, started_at: datetime) -> None:
        """Remember when ``epoch`` began, dropping the oldest beyond capacity.

        Raises:
            ValueError: ``epoch`` is not above every epoch already kept
                (entries are folded in log order).
        """
        if self._starts and epoch <= next(reversed(self._starts)):
            raise ValueError(f"epoch {epoch} recorded out of order")
        self._starts[epoch] = started_at
        while len(self._starts) > self._capacity:
            _, dropped = self._starts.popitem(last=False)
            if self._older_started_by is None or dropped > self._older_started_by:
                self._older_started_by = dropped

    def started_at(self, epoch: int) -> datetime | None:
        """When ``epoch`` began; for an epoch older than those kept, an
        upper bound of it; ``None`` when unknown (epoch 0, not read yet)."""
        exact = self._starts.get(epoch)
        if exact is not None:
            return exact
        oldest_kept = next(iter(self._starts), None)
        if epoch >= CONTROLLER_FIRST_OFFSET and (oldest_kept is None or epoch < oldest_kept):
            return self._older_started_by
        return None


def snapshot_of(view: ControllerView, starts: EpochStarts) -> ControllerSnapshot:
    """The snapshot document of a fold. Pure."""
    return ControllerSnapshot(
        offset=view.offset,
        topics=tuple(
            SnapshotTopic(t.name, t.revision, t.partitions, dict(t.config))
            for t in sorted(view.topics.values(), key=lambda t: t.name)
        ),
        deleted_topics=tuple(view.deleted[k] for k in sorted(view.deleted)),
        epoch_starts=starts.items(),
        older_epochs_started_by=starts.older_started_by,
    )


def restore_snapshot(
    snapshot: ControllerSnapshot, capacity: int = DEFAULT_EPOCH_HISTORY
) -> tuple[ControllerView, EpochStarts]:
    """The fold a snapshot holds, keeping at most ``capacity`` epoch starts. Pure."""
    topics = {
        t.name: TopicInfo(t.name, t.partitions, t.revision, dict(t.config)) for t in snapshot.topics
    }
    deleted = {(d.name, d.revision): d for d in snapshot.deleted_topics}
    starts = EpochStarts(capacity, snapshot.epoch_starts, snapshot.older_epochs_started_by)
    return ControllerView(snapshot.offset, topics, deleted), starts


@dataclass(frozen=True)
class CompactionResult:
    """What one ``Controller.compact`` did.

    ``snapshot_offset`` is the offset the stored snapshot covers afterwards
    (ours or a concurrent compactor's); ``skipped`` says fewer than
    ``min_entries`` entries were above the snapshot, so nothing was done.
    """

    snapshot_offset: int
    snapshot_written: bool
    entries_deleted: int
    entries_above_snapshot: int
    skipped: bool = False


@dataclass(frozen=True)
class CompactionPolicy:
    """When the GC leader compacts the controller log (``[controller]``).

    Args:
        interval_seconds: time between compactions.
        min_entries: skip a compaction while fewer entries than this are
            above the snapshot (each compaction rewrites the whole snapshot).
        epoch_history: epoch start times the compactor keeps and writes
            (``EpochStarts``); fewer can only make retention keep records
            longer, never drop them early.
    """

    interval_seconds: float = 3600.0
    min_entries: int = 1000
    epoch_history: int = DEFAULT_EPOCH_HISTORY

    def __post_init__(self) -> None:
        if self.interval_seconds <= 0:
            raise ValueError(f"interval_seconds must be > 0, got {self.interval_seconds}")
        if self.min_entries < 0:
            raise ValueError(f"min_entries must be >= 0, got {self.min_entries}")
        if self.epoch_history < 1:
            raise ValueError(f"epoch_history must be >= 1, got {self.epoch_history}")


SNAPSHOT_CHUNK = 64
"""Controller entries read (one LIST, parallel GETs) and folded at a time."""

LATE_WRITE_ATTEMPTS = 3
"""Appends of one ``create_topic`` or ``delete_topic`` tried while each lands
in a truncated slot (each needs two appends and a compaction by others
between choosing the slot and writing it)."""

SNAPSHOT_CAS_ATTEMPTS = 3
"""Snapshot writes tried by one compaction before leaving it to the next:
each lost race means another compactor wrote a snapshot, which does the job."""


@dataclass(frozen=True)
class EpochAdvanceStarted(Event):
    """``Controller.advance_to`` starts ticking from ``current`` to ``target``."""

    current: int
    target: int


@dataclass(frozen=True)
class EpochTicked(Event):
    """``Controller.advance_to`` moved the cluster epoch to ``epoch``."""

    epoch: int


class Controller:
    """Reads and appends the controller log; keeps an incrementally updated view.

    Example::

        controller = Controller(store, "epochgc")
        orders = controller.create_topic("orders", partitions=4)
        epoch = controller.tick()

    Args:
        store: the bucket.
        root: the layout root.
        epoch_history: epoch start times kept in memory (and written by
            ``compact``); see ``EpochStarts``.
        runtime: the wall clock for entry timestamps, the entries' nonces,
            the lock and the log's back-off (virtual in tests and
            ``epochgc simulate``).
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        *,
        epoch_history: int = DEFAULT_EPOCH_HISTORY,
        runtime: Runtime = SYSTEM,
    ) -> None:
        self._store = store
        self._root = root
        self._now = runtime.wall
        self._nonce = runtime.new_id
        self._log = ConditionalAppendLog(
            store,
            controller_log_prefix(root),
            first_offset=CONTROLLER_FIRST_OFFSET,
            snapshot_key=controller_snapshot_key(root),
            runtime=runtime,
        )
        self._lock = runtime.lock()
        self._view = ControllerView.empty()
        self._epochs = EpochStarts(epoch_history)
        self._snapshot_looked_up = False
        self._snapshot_etag: str | None = None
        """The etag of the stored snapshot last read (it covers at most the view)."""

    @property
    def log(self) -> ConditionalAppendLog:
        return self._log

    def snapshot(self) -> ControllerView:
        """Catch up with the log and return the view at its tail.

        The first call reads the stored snapshot (one GET), then every call
        reads the entries after the view in chunks, and after a chunk that
        has entries looks whether the snapshot changed (one HEAD). Entries
        truncated under this reader, or replaced by late writes into their
        truncated slots, are found in a newer snapshot, which is read again.

        Raises:
            MalformedRecordError, UnsupportedVersionError: an entry or the
                snapshot is one this reader cannot trust; a collector must
                stop (``safety_blocked``) rather than compute ``M`` from a
                partial view.
            CorruptLogError: the snapshot's metadata and body disagree.
        """
        with self._lock:
            if not self._snapshot_looked_up:
                self._load_stored_snapshot()
            while True:
                start = self._view.offset + 1
                # In chunks, each kept as soon as it is folded: a process
                # starting on a long log under a flaky store makes progress
                # across failed attempts instead of starting over each time.
                try:
                    read = self._log.read(start, limit=SNAPSHOT_CHUNK)
                except NotFoundError:
                    # Listed, then gone before its GET: truncated by a compaction.
                    if self._load_stored_snapshot():
                        continue
                    raise
                if read.entries and self._snapshot_covers_since():
                    log.info(
                        "controller snapshot moved past offset %d while reading; adopted it", start
                    )
                    continue  # the entries may be late writes the snapshot never folded
                self._fold(read.entries)
                if read.hole is not None:
                    if read.entries:
                        continue  # decide at the hole, where the next read starts
                    if self._load_stored_snapshot():
                        log.info(
                            "controller log truncated past offset %d; reread the snapshot", start
                        )
                        continue
                    log.warning(
                        "controller log has a hole at offset %d; view stops there", read.hole
                    )
                    return self._view
                if len(read.entries) < SNAPSHOT_CHUNK:
                    return self._view

    def _snapshot_covers_since(self) -> bool:
        """Adopt the stored snapshot if one newer than the last read now
        covers more than the view; return whether it did (under the lock).

        Called after reading entries: a snapshot that covers one of them
        was written before that entry was read (snapshots only move
        forward), so the entry may be a late write into a truncated slot;
        one that does not cover them proves they are the log's own.
        """
        etag = self._log.snapshot_etag()
        if etag is None or etag == self._snapshot_etag:
            return False  # no snapshot, or the one read, which covers at most the view
        return self._load_stored_snapshot()

    def _fold(self, entries: Sequence[LogEntry]) -> None:
        """Fold a chunk; keep it only if every entry decodes (under the lock)."""
        decoded = [
            (e.offset, decode_controller_entry(e.payload, f"controller entry {e.offset}"))
            for e in entries
        ]
        view = self._view
        for offset, entry in decoded:
            view = fold_controller(view, offset, entry)
            self._epochs.record(offset, entry.ts)
        self._view = view

    def _load_stored_snapshot(self) -> bool:
        """Read the stored snapshot (one GET) and adopt it if it covers more
        than the view; return whether it did (under the lock).

        Raises:
            MalformedRecordError, UnsupportedVersionError: an untrusted body.
            CorruptLogError: its covered-offset metadata is not its offset.
        """
        stored = self._log.read_snapshot()
        self._snapshot_looked_up = True
        self._snapshot_etag = stored.etag if stored is not None else None
        if stored is None or stored.covered_offset <= self._view.offset:
            return False
        self._view, self._epochs = self._decode_stored(stored)
        return True

    def _decode_stored(self, stored: LogSnapshot) -> tuple[ControllerView, EpochStarts]:
        where = f"controller snapshot {controller_snapshot_key(self._root)}"
        decoded = decode_controller_snapshot(stored.payload, where)
        if decoded.offset != stored.covered_offset:
            raise CorruptLogError(
                f"{where}: metadata covers offset {stored.covered_offset} but the body is at "
                f"{decoded.offset}"
            )
        return restore_snapshot(decoded, self._epochs.capacity)

    def compact(self, *, min_entries: int = 0) -> CompactionResult:
        """Snapshot the view at the log's tail and delete the entries it covers.

        Steps:

        1. Catch up with the log (the view at its tail, offset ``T``).
        2. Read the stored snapshot; if fewer than ``min_entries`` entries
           are above it, stop (``skipped``).
        3. Write the snapshot of the view at ``T`` by CAS against the one
           read (create-only if there is none). On a lost race, re-read: a
           concurrent snapshot covering ``T`` or more does the job; else
           try again, at most ``SNAPSHOT_CAS_ATTEMPTS`` times.
        4. Delete the entries the stored snapshot covers (DeleteObjects of
           at most 1000 keys), never the newest entry: readers that start
           below find a hole and re-read the snapshot of step 3.

        Raises:
            MalformedRecordError, UnsupportedVersionError: the log or the
                stored snapshot cannot be trusted (nothing is written).
            DeleteFailedError: some entries could not be deleted (the
                snapshot is written; the next compaction deletes them).
        """
        view = self.snapshot()
        stored = self._log.read_snapshot()
        covered = stored.covered_offset if stored is not None else CONTROLLER_FIRST_OFFSET - 1
        above = max(0, view.offset - covered)
        if above < max(1, min_entries):
            return CompactionResult(covered, False, 0, above, skipped=True)
        with self._lock:
            payload = encode_controller_snapshot(snapshot_of(self._view, self._epochs))
            target = self._view.offset
        written = False
        for attempt in range(1, SNAPSHOT_CAS_ATTEMPTS + 1):
            try:
                stored = self._log.write_snapshot(payload, target, stored)
            except (PreconditionFailedError, ConflictError):
                stored = self._log.read_snapshot()
                if stored is not None and stored.covered_offset >= target:
                    break  # a concurrent compactor covered as much
                log.info("controller snapshot race lost (attempt %d); retrying", attempt)
                continue
            written = True
            with self._lock:
                self._snapshot_etag = stored.etag  # ours, at or below the view: no re-read
            break
        if stored is None or (not written and stored.covered_offset < target):
            log.warning(
                "controller snapshot not written after %d lost races; the next compaction retries",
                SNAPSHOT_CAS_ATTEMPTS,
            )
        covered = stored.covered_offset if stored is not None else covered
        deleted = self._log.truncate(covered + 1) if stored is not None else 0
        log.info(
            "controller compacted: snapshot at offset %d (%s), %d entries deleted",
            covered,
            "written" if written else "another compactor's",
            deleted,
        )
        return CompactionResult(covered, written, deleted, above)

    def epoch_started_at(self, epoch: int) -> datetime | None:
        """When ``epoch`` began (its controller entry's ``ts``): the clock
        retention ages records by.

        Known for the newest epochs this controller read (``epoch_history``
        of them); an older epoch answers an upper bound of its start (see
        ``EpochStarts``); ``None`` for an epoch not read yet, which
        retention treats as new (kept).
        """
        with self._lock:
            return self._epochs.started_at(epoch)

    def current_epoch(self) -> int:
        """The cluster epoch: the controller log's newest offset (one LIST)."""
        return self._log.tail()

    def tick(self, still_allowed: Callable[[], None] | None = None) -> int:
        """Append an ``epoch_tick``; return the new epoch. Concurrent ticks are harmless.

        The tail is listed first (one LIST): a ticker taking the role back
        knows an old tail whose next slot may have been truncated since, and
        a tick written there is a late write nobody reads. One sent late
        anyway (a pause between the LIST and the PUT) only fails to move the
        epoch, which the next tick does, provided its writer does not retry
        at the next slot: ``still_allowed`` is called before every attempt
        and raises once the ticker's role has run out (a holder paused past
        its grant lost the slot to the new holder's tick, then wrote the
        next one, two ticks a second apart: found by ``epochgc simulate``).
        """
        self._log.tail()
        entry = encode_controller_entry(EpochTick(self._now(), self._nonce()))
        offset = self._log.append(entry, before_each=still_allowed)
        log.debug("epoch tick -> %d", offset)
        return offset

    def advance_to(
        self,
        epoch: int,
        *,
        max_steps: int = 10_000,
        events: EventChannel | None = None,
    ) -> int:
        """Tick until the cluster epoch is at least ``epoch``; return it.

        Moving the epoch never makes anything unsafe (every partition's
        window rejects what is older than its own lower bound), but each
        step is one controller-log object, hence the bound. Each tick is a
        request, so a long advance takes seconds: ``EpochAdvanceStarted``
        is published on ``events`` once the request is judged valid, and
        ``EpochTicked`` at every new epoch, so a caller can show progress.

        Raises:
            InvalidArgumentError: ``epoch`` is not above the current epoch,
                or is more than ``max_steps`` ahead of it.
        """
        current = self.current_epoch()
        if epoch <= current:
            raise InvalidArgumentError(
                f"refusing to advance to {epoch}: the cluster epoch is already {current}"
            )
        if epoch - current > max_steps:
            raise InvalidArgumentError(
                f"refusing to advance by {epoch - current} epochs (more than {max_steps}): "
                "each is one controller-log object"
            )
        events = events if events is not None else EventChannel()
        events.publish(EpochAdvanceStarted(current, epoch))
        while current < epoch:
            current = self.tick()
            events.publish(EpochTicked(current))
        return current

    def create_topic(
        self, name: str, partitions: int, config: Mapping[str, Any] | None = None
    ) -> TopicInfo:
        """Create a topic and its partitions' initial snapshots.

        Raises:
            InvalidArgumentError: invalid name or partition count.
            TopicExistsError: the name is live (maybe created concurrently).
            RetriesExhaustedError: every append landed in a truncated slot.
        """
        if not is_valid_topic(name):
            raise InvalidArgumentError(
                f"invalid topic name {name!r}: must match [A-Za-z0-9._-]{{1,249}} "
                "and not be '.' or '..'"
            )
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidArgumentError(
                f"partitions must be in 1..{MAX_PARTITIONS}, got {partitions}"
            )
        for attempt in range(1, LATE_WRITE_ATTEMPTS + 1):
            live = self.snapshot().topics.get(name)
            if live is not None:
                raise TopicExistsError(
                    f"topic {name!r} already exists (revision {live.revision}); nothing done"
                )
            entry = CreateTopic(name, partitions, dict(config or {}), self._now(), self._nonce())
            offset = self._log.append(encode_controller_entry(entry))
            view = self._view_until(offset)
            info = view.topics.get(name)
            if info is None and (name, offset) not in view.deleted:
                # Neither live nor deleted: our entry is a late write into a
                # truncated slot, which no view has.
                log.warning(
                    "create_topic %s landed in truncated slot %d (attempt %d); appending again",
                    name,
                    offset,
                    attempt,
                )
                continue
            if info is None or info.revision != offset:
                winner = f"at revision {info.revision}" if info is not None else "and deleted"
                raise TopicExistsError(
                    f"topic {name!r} was created {winner} by another writer; nothing done "
                    f"(this command's entry at offset {offset} did nothing)"
                )
            break
        else:
            raise RetriesExhaustedError(
                f"create_topic {name!r} landed in a truncated controller-log slot "
                f"{LATE_WRITE_ATTEMPTS} times in a row",
                None,
            )
        for partition in range(partitions):
            self._write_initial_snapshot(info, partition)
        log.info(
            "created topic %s with %s at revision %d",
            name,
            counted(partitions, "partition"),
            offset,
        )
        return info

    def delete_topic(self, name: str, *, revision: int | None = None) -> TopicDeletion:
        """End the live incarnation of ``name`` (or, with ``revision``, only
        that incarnation) with a ``delete_topic`` that names it; say whether
        this writer's entry ended it or another writer's did first.

        The entry names the revision read here, so however late it lands
        (a lost slot and its back-off, a pause) it can only end that
        incarnation, never one created after the read.

        Raises:
            TopicNotFoundError: the topic is not live, or ``revision`` is
                not the live incarnation.
            RetriesExhaustedError: every append landed in a truncated slot.
        """
        live = self.snapshot().topics.get(name)
        if live is None:
            raise TopicNotFoundError(f"topic {name!r} does not exist")
        if revision is not None and revision != live.revision:
            raise TopicNotFoundError(
                f"{name}@{revision} is not live ({name}@{live.revision} is); nothing done"
            )
        target = live.revision
        for attempt in range(1, LATE_WRITE_ATTEMPTS + 1):
            entry = DeleteTopic(name, self._now(), target, self._nonce())
            offset = self._log.append(encode_controller_entry(entry))
            gone = self._view_until(offset).deleted.get((name, target))
            if gone is not None:
                outcome = TopicDeletion(name, target, offset, gone.deleted_at)
                log.info("%s", outcome.describe())
                return outcome
            # Still live: our entry (which names the live revision, so the
            # fold would have ended it) is a late write into a truncated slot.
            log.warning(
                "delete_topic %s@%d landed in truncated slot %d (attempt %d); appending again",
                name,
                target,
                offset,
                attempt,
            )
        raise RetriesExhaustedError(
            f"delete_topic {name}@{target} landed in a truncated controller-log slot "
            f"{LATE_WRITE_ATTEMPTS} times in a row",
            None,
        )

    def topic(self, name: str) -> TopicInfo:
        """The live topic ``name``.

        Raises:
            TopicNotFoundError: not live.
        """
        info = self.snapshot().topics.get(name)
        if info is None:
            raise TopicNotFoundError(f"topic {name!r} does not exist")
        return info

    def _view_until(self, offset: int) -> ControllerView:
        view = self.snapshot()
        if view.offset < offset:
            raise RuntimeError(f"controller view stopped at {view.offset} before {offset}")
        return view

    def _write_initial_snapshot(self, info: TopicInfo, partition: int) -> None:
        """A fresh partition's snapshot at its revision.

        The snapshot lives under the revision, so one that exists already can
        only be this incarnation's (a leader that started first); anything
        else is a corrupt bucket, reported rather than swallowed.

        Raises:
            CorruptLogError: the existing snapshot holds another revision.
        """
        pid = PartitionId(info.name, info.revision, partition)
        state = PartitionState.new(info.revision)
        partition_log = open_partition_log(self._store, self._root, pid)
        try:
            partition_log.write_snapshot(
                encode_snapshot(PartitionSnapshot(state)), state.applied_log_offset, None
            )
        except PreconditionFailedError:
            existing = partition_log.read_snapshot()
            if existing is None:
                return
            held = decode_snapshot(existing.payload, f"snapshot of {pid}").state.revision
            if held != info.revision:
                raise CorruptLogError(
                    f"snapshot of {pid} holds revision {held}; refusing to reuse it"
                ) from None
