"""The controller log and the cluster epoch (DESIGN.md section 4).

The controller log is a conditional-append log of ``create_topic``,
``delete_topic`` and ``epoch_tick`` entries starting at offset 1. The
cluster epoch is the newest offset; a topic's revision is the offset of its
``create_topic`` entry, so every epoch observed after a topic exists is at
least its revision.

``fold_controller`` (pure) turns entries into a ``ControllerView``; the
``Controller`` class does the I/O. Concurrent creators of one name both
append; the first live ``create_topic`` in log order wins and the loser is
told so (``TopicExistsError``), which every reader agrees on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from epochgc.errors import (
    CorruptLogError,
    InvalidArgumentError,
    PreconditionFailedError,
    TopicExistsError,
    TopicNotFoundError,
)
from epochgc.storage.cas_log import ConditionalAppendLog
from epochgc.storage.keys import PartitionId, controller_log_prefix, is_valid_topic
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.records import (
    ControllerEntry,
    CreateTopic,
    DeleteTopic,
    EpochTick,
    PartitionSnapshot,
    decode_controller_entry,
    decode_snapshot,
    encode_controller_entry,
    encode_snapshot,
)
from epochgc.watermarks.replica import open_partition_log
from epochgc.watermarks.state import PartitionState

log = logging.getLogger("epochgc.watermarks.controller")

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
class ControllerView:
    """Live topics as of controller offset ``offset`` (the cluster epoch)."""

    offset: int
    topics: Mapping[str, TopicInfo]

    @staticmethod
    def empty() -> ControllerView:
        return ControllerView(CONTROLLER_FIRST_OFFSET - 1, {})

    def live_partitions(self) -> set[PartitionId]:
        """Every partition of every live topic incarnation."""
        return {pid for info in self.topics.values() for pid in info.partition_ids()}


def fold_controller(view: ControllerView, offset: int, entry: ControllerEntry) -> ControllerView:
    """Apply one controller entry at ``offset``. Pure and deterministic.

    A ``create_topic`` of a live name and a ``delete_topic`` of a name that
    is not live change nothing but the offset.
    """
    topics = view.topics
    if isinstance(entry, CreateTopic) and entry.topic not in topics:
        info = TopicInfo(entry.topic, entry.partitions, offset, dict(entry.config))
        topics = {**topics, entry.topic: info}
    elif isinstance(entry, DeleteTopic) and entry.topic in topics:
        topics = {k: v for k, v in topics.items() if k != entry.topic}
    return ControllerView(offset, topics)


SNAPSHOT_CHUNK = 64
"""Controller entries read (one LIST, parallel GETs) and folded at a time."""


class Controller:
    """Reads and appends the controller log; keeps an incrementally updated view.

    Example::

        controller = Controller(store, "epochgc")
        orders = controller.create_topic("orders", partitions=4)
        epoch = controller.tick()

    Args:
        store: the bucket.
        root: the layout root.
        now: wall clock for entry timestamps (injected for tests).
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._root = root
        self._now = now
        self._log = ConditionalAppendLog(
            store, controller_log_prefix(root), first_offset=CONTROLLER_FIRST_OFFSET
        )
        self._lock = threading.Lock()
        self._view = ControllerView.empty()
        self._epoch_started_at: dict[int, datetime] = {}

    @property
    def log(self) -> ConditionalAppendLog:
        return self._log

    def snapshot(self) -> ControllerView:
        """Catch up with the log and return the view at its tail.

        Raises:
            MalformedRecordError, UnsupportedVersionError: an entry this
                reader cannot trust; a collector must stop (``safety_blocked``)
                rather than compute ``M`` from a partial view.
        """
        with self._lock:
            while True:
                # In chunks, each kept as soon as it is folded: a process
                # starting on a long log under a flaky store makes progress
                # across failed attempts instead of starting over each time.
                read = self._log.read(self._view.offset + 1, limit=SNAPSHOT_CHUNK)
                view = self._view
                for entry in read.entries:
                    where = f"controller entry {entry.offset}"
                    decoded = decode_controller_entry(entry.payload, where)
                    view = fold_controller(view, entry.offset, decoded)
                    self._epoch_started_at[entry.offset] = decoded.ts
                self._view = view
                if read.hole is not None:
                    log.warning(
                        "controller log has a hole at offset %d; view stops there", read.hole
                    )
                    return view
                if len(read.entries) < SNAPSHOT_CHUNK:
                    return view

    def epoch_started_at(self, epoch: int) -> datetime | None:
        """When ``epoch`` began (its controller entry's ``ts``), if this
        controller has read that entry: the clock retention ages records by."""
        with self._lock:
            return self._epoch_started_at.get(epoch)

    def current_epoch(self) -> int:
        """The cluster epoch: the controller log's newest offset (one LIST)."""
        return self._log.tail()

    def tick(self) -> int:
        """Append an ``epoch_tick``; return the new epoch. Concurrent ticks are harmless."""
        offset = self._log.append(encode_controller_entry(EpochTick(self._now())))
        log.debug("epoch tick -> %d", offset)
        return offset

    def advance_to(self, epoch: int, *, max_steps: int = 10_000) -> int:
        """Tick until the cluster epoch is at least ``epoch``; return it.

        Moving the epoch never makes anything unsafe (every partition's
        window rejects what is older than its own lower bound), but each
        step is one controller-log object, hence the bound.

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
        while current < epoch:
            current = self.tick()
        return current

    def create_topic(
        self, name: str, partitions: int, config: Mapping[str, Any] | None = None
    ) -> TopicInfo:
        """Create a topic and its partitions' initial snapshots.

        Raises:
            InvalidArgumentError: invalid name or partition count.
            TopicExistsError: the name is live (maybe created concurrently).
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
        if name in self.snapshot().topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        entry = CreateTopic(name, partitions, dict(config or {}), self._now())
        offset = self._log.append(encode_controller_entry(entry))
        info = self._view_until(offset).topics.get(name)
        if info is None or info.revision != offset:
            raise TopicExistsError(f"topic {name!r} was created concurrently by another process")
        for partition in range(partitions):
            self._write_initial_snapshot(info, partition)
        log.info("created topic %s with %d partitions at revision %d", name, partitions, offset)
        return info

    def delete_topic(self, name: str) -> int:
        """Append ``delete_topic``; return its offset.

        Raises:
            TopicNotFoundError: the topic is not live.
        """
        if name not in self.snapshot().topics:
            raise TopicNotFoundError(f"topic {name!r} does not exist")
        offset = self._log.append(encode_controller_entry(DeleteTopic(name, self._now())))
        log.info("deleted topic %s at offset %d", name, offset)
        return offset

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
