"""A partition replica: the pure state bound to its conditional-append log.

Any process may open a replica and follow the log; the process holding the
partition's lease leads it and writes through a ``TermWriter``
(``term_writer.py``): it starts its term with a ``term_start`` entry, stamps
every command with its term and the next sequence number, and appends
through a pipeline. The log decides: a command
counts only as replay applies it, so a deposed leader's late entries (an
older term after a newer ``term_start``) change nothing, and a leader whose
pipeline was cut by a foreign entry replays its unacknowledged tail, which
sequence numbers keep free of duplicates and reordering.

Snapshots are written by CAS and cover ``applied_log_offset``; truncation
then removes entries below both the snapshot and the oldest placeholder
still needed, bounded by ``min(lro + 1, allowed_local_start_offset)``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from epochgc.errors import (
    CorruptLogError,
    FencedError,
    PreconditionFailedError,
)
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.cas_log import ConditionalAppendLog, LogEntry, LogSnapshot
from epochgc.storage.keys import PartitionId, partition_log_prefix, partition_snapshot_key
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.partition.codec import (
    LostRange,
    PartitionSnapshot,
    RetainedPlaceholder,
    decode_command,
    decode_snapshot,
    encode_command,
    encode_snapshot,
)
from epochgc.watermarks.partition.commands import (
    Command,
    Placeholders,
    RecordsLost,
)
from epochgc.watermarks.partition.state import (
    SAFE,
    ApplyResult,
    Outcome,
    PartitionState,
    SafetyRules,
    apply,
)
from epochgc.watermarks.partition.window import EpochWindow

log = logging.getLogger(__name__)


def open_partition_log(
    store: ObjectStore, root: str, pid: PartitionId, *, runtime: Runtime = SYSTEM
) -> ConditionalAppendLog:
    """The conditional-append log (with its snapshot) of one partition."""
    return ConditionalAppendLog(
        store,
        partition_log_prefix(root, pid),
        first_offset=0,
        snapshot_key=partition_snapshot_key(root, pid),
        runtime=runtime,
    )


def truncation_record_bound(state: PartitionState) -> int:
    """Records below this offset may leave the log: they are in L1
    (``<= lro``) and outside the local retention the reconciler asked for."""
    reconciled = state.lro + 1
    hint = state.allowed_local_start_offset
    return reconciled if hint is None else min(reconciled, hint)


@dataclass(frozen=True)
class AppliedEntry:
    """One log entry as replay applied it."""

    offset: int
    command: Command
    result: ApplyResult


class PartitionReplica:
    """Follows one partition's log.

    Example::

        replica = PartitionReplica(store, "epochgc", PartitionId("orders", 7, 0))
        state = replica.open()
        replica.state.safe_epoch

    Args:
        pid: the partition incarnation; its log and snapshot live under its
            revision, and a partition with no snapshot yet (its creator
            crashed before writing one) starts from ``PartitionState.new``.
        rules: test-only; production always uses ``SAFE``.
        runtime: the log's lock, back-off and read pool, and the nonces of
            entries written through this replica.
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        pid: PartitionId,
        *,
        rules: SafetyRules = SAFE,
        runtime: Runtime = SYSTEM,
    ) -> None:
        self.pid = pid
        self.topic = pid.topic
        self.partition = pid.partition
        self.runtime = runtime
        self._log = open_partition_log(store, root, pid, runtime=runtime)
        self._rules = rules
        self._state: PartitionState | None = None
        self._retained: list[RetainedPlaceholder] = []
        self._lost: list[LostRange] = []
        self._snapshot: LogSnapshot | None = None
        self._written_snapshot_etag: str | None = None
        self.hole: int | None = None

    @property
    def log(self) -> ConditionalAppendLog:
        return self._log

    @property
    def state(self) -> PartitionState:
        if self._state is None:
            raise RuntimeError("replica not opened; call open() first")
        return self._state

    @property
    def retained(self) -> tuple[RetainedPlaceholder, ...]:
        """Accepted placeholders still in the log, oldest first."""
        return tuple(self._retained)

    @property
    def lost(self) -> tuple[LostRange, ...]:
        """Ranges of records recorded as lost (``records_lost``), oldest first."""
        return tuple(self._lost)

    def applied_window(self) -> EpochWindow:
        """``[previous_applied_epoch, max_applied_epoch]``."""
        s = self.state
        return EpochWindow(s.previous_applied_epoch, s.max_applied_epoch)

    def open(self) -> PartitionState:
        """Load the snapshot (or the initial state) and replay the log.

        Raises:
            CorruptLogError: a snapshot of another revision, or one whose
                metadata disagrees with its content.
            MalformedRecordError, UnsupportedVersionError: an entry or a
                snapshot this reader cannot trust.
        """
        self._load_snapshot()
        self.catch_up()
        return self.state

    def _load_snapshot(self) -> None:
        self._adopt_snapshot(self._log.read_snapshot())

    def _adopt_snapshot(self, snapshot: LogSnapshot | None) -> None:
        where = f"snapshot of {self.pid}"
        if snapshot is None:
            decoded = PartitionSnapshot(PartitionState.new(self.pid.revision))
        else:
            decoded = decode_snapshot(snapshot.payload, where)
            if decoded.state.revision != self.pid.revision:
                # Never adopt another incarnation's state: its placeholders
                # point into L0 objects the collector may already have
                # deleted under this incarnation's floor.
                raise CorruptLogError(
                    f"{where}: holds revision {decoded.state.revision}, "
                    f"not {self.pid.revision}; refusing another incarnation's state"
                )
            if decoded.state.applied_log_offset != snapshot.covered_offset:
                raise CorruptLogError(
                    f"{where}: covers offset {snapshot.covered_offset} but its state is at "
                    f"{decoded.state.applied_log_offset}"
                )
        self._snapshot = snapshot
        self._state = decoded.state
        self._retained = list(decoded.retained)
        self._lost = list(decoded.lost)

    def catch_up(self) -> list[AppliedEntry]:
        """Apply every new contiguous entry; return what was applied.

        Stops at a hole (``self.hole``); if the hole is where reading
        started and a newer snapshot covers it (someone truncated past us),
        reloads from that snapshot and continues.

        Entries just read are applied only if no newer snapshot covers
        them (one HEAD per read that found entries): truncation frees the
        slots a snapshot covers, and a create-only put whose slot was
        chosen before the truncation (a deposed leader, an operator's
        ``records_lost``) lands there afterwards, below the snapshot, where
        no reader starting from the snapshot looks. Snapshots only move
        forward and a slot is truncated only after a snapshot covers it,
        so a snapshot that does not cover what was read proves the entries
        are the log's own; one that does replaces them.
        """
        applied: list[AppliedEntry] = []
        reloaded = False
        while True:
            start = self.state.applied_log_offset + 1
            read = self._log.read(start)
            if read.entries and self._newer_snapshot_covers(start):
                log.info(
                    "%s/%d: a snapshot moved past offset %d while reading; adopted it",
                    self.topic,
                    self.partition,
                    start,
                )
                applied = [a for a in applied if a.offset > self.state.applied_log_offset]
                continue
            for entry in read.entries:
                command = decode_command(entry.payload, f"{self._log.key_of(entry.offset)}")
                applied.append(self._apply(entry.offset, command))
            self.hole = read.hole
            if read.hole is None or read.hole != start or reloaded:
                return applied
            newer = self._log.read_snapshot()
            if newer is None or newer.covered_offset < start:
                return applied
            log.info("%s/%d: log truncated past us; reloading snapshot", self.topic, self.partition)
            self._adopt_snapshot(newer)
            reloaded = True

    def _newer_snapshot_covers(self, offset: int) -> bool:
        """Adopt the stored snapshot if it changed since this replica last
        saw it and covers ``offset``; return whether it did. A changed one
        that covers less is remembered (it is the one a snapshot write must
        replace) but leaves the state alone."""
        known = self._snapshot.etag if self._snapshot is not None else None
        etag = self._log.snapshot_etag()
        if etag is None or etag == known:
            return False
        stored = self._log.read_snapshot()
        if stored is None or stored.covered_offset < offset:
            self._snapshot = stored
            return False
        self._adopt_snapshot(stored)
        return True

    @property
    def snapshot_etag(self) -> str | None:
        """The etag of the stored snapshot this replica last saw (``None``:
        none yet)."""
        return self._snapshot.etag if self._snapshot is not None else None

    @property
    def written_snapshot_etag(self) -> str | None:
        """The etag of the snapshot this replica itself wrote last (``None``:
        none), for a leader to tell its own snapshots from another's."""
        return self._written_snapshot_etag

    def apply_known(
        self, entries: Sequence[LogEntry], commands: Sequence[Command]
    ) -> list[AppliedEntry]:
        """Apply entries this process itself wrote at the next offsets.

        Raises:
            ValueError: the entries do not continue the applied log.
        """
        applied = []
        for entry, command in zip(entries, commands, strict=True):
            if entry.offset != self.state.applied_log_offset + 1:
                raise ValueError(
                    f"entry {entry.offset} does not follow {self.state.applied_log_offset}"
                )
            applied.append(self._apply(entry.offset, command))
        return applied

    def _apply(self, offset: int, command: Command) -> AppliedEntry:
        result = apply(self.state, command, offset, self._rules)
        if (
            isinstance(command, Placeholders)
            and result.outcome is Outcome.APPLIED
            and result.first_record_offset is not None
        ):
            last = result.first_record_offset + command.record_count - 1
            size = sum(b.byte_length for b in command.batches)
            self._retained.append(
                RetainedPlaceholder(offset, result.first_record_offset, last, size, command.epoch)
            )
        if isinstance(command, RecordsLost) and result.outcome is Outcome.APPLIED:
            self._lost.append(
                LostRange(command.first, command.last, command.ts, command.by, command.reason)
            )
        self._state = result.state
        return AppliedEntry(offset, command, result)

    def append_records_lost(
        self, build: Callable[[PartitionReplica], RecordsLost], *, attempts: int = 8
    ) -> AppliedEntry:
        """Append an operator's ``records_lost`` right after the entry it
        was planned against: catch up, ``build`` the command from this
        state, put it at the next slot (or the hole a crashed writer left);
        if another writer took the slot, catch up and plan again, so the
        entry is always judged by replay against the state it was built
        from. A leader of the current term loses its next slot to it and
        must start a new term (see ``TermWriter``).

        Raises:
            InvalidArgumentError: from ``build`` (nothing left to skip, ...).
            FencedError: replay did not apply it, or the slot stayed contested.
        """
        for _ in range(attempts):
            self.catch_up()
            command = dataclasses.replace(build(self), nonce=self.runtime.new_id())
            slot = self.hole if self.hole is not None else self.state.applied_log_offset + 1
            if not self._log.append_at(slot, encode_command(command)):
                continue
            for entry in self.catch_up():
                if entry.offset == slot:
                    if entry.result.outcome is not Outcome.APPLIED:
                        raise FencedError(
                            f"{self.topic}/{self.partition}: records_lost at log offset {slot} "
                            f"was not applied ({entry.result.outcome.value})"
                        )
                    return entry
            # Not read back: a snapshot covers the slot, so the put landed
            # below it after a truncation freed the slot (see ``catch_up``)
            # and no reader will ever replay it. Plan again from that state.
            log.info(
                "%s/%d: records_lost put at freed log offset %d; planning again",
                self.topic,
                self.partition,
                slot,
            )
        raise FencedError(
            f"{self.topic}/{self.partition}: the log tail kept moving; "
            f"gave up after {attempts} attempts"
        )

    def write_snapshot(self) -> bool:
        """Snapshot the applied state by CAS; False if nothing new to cover
        or another process snapshotted first (it covers as much or more)."""
        covered = self.state.applied_log_offset
        if self._snapshot is not None and covered <= self._snapshot.covered_offset:
            return False
        payload = encode_snapshot(
            PartitionSnapshot(self.state, tuple(self._retained), tuple(self._lost))
        )
        try:
            self._snapshot = self._log.write_snapshot(payload, covered, self._snapshot)
            self._written_snapshot_etag = self._snapshot.etag
        except PreconditionFailedError:
            self._snapshot = self._log.read_snapshot()
            return False
        return True

    def snapshot_due(self, every_entries: int) -> bool:
        """Whether ``every_entries`` entries were applied since the snapshot."""
        if every_entries < 1:
            raise ValueError("every_entries must be >= 1")
        covered = self._snapshot.covered_offset if self._snapshot is not None else -1
        return self.state.applied_log_offset - covered >= every_entries

    def under_space_pressure(self, max_log_entries: int) -> bool:
        """A log longer than ``max_log_entries`` (> 0) is truncated up to
        ``lro`` whatever the retention hint asks."""
        return 0 < max_log_entries < self.log_length()

    def log_length(self) -> int:
        """About how many entries the log holds (from its oldest retained
        placeholder, or the snapshot, to the applied end)."""
        if self._retained:
            start = self._retained[0].log_offset
        elif self._snapshot is not None:
            start = self._snapshot.covered_offset + 1
        else:
            start = 0
        return max(0, self.state.applied_log_offset - start + 1)

    def truncate(self, *, ignore_hint: bool = False) -> int:
        """Delete log entries the snapshot covers and no reader needs; return
        how many were deleted.

        Args:
            ignore_hint: space pressure: keep only what is not yet in L1
                (records above ``lro``), whatever the retention hint asks.
        """
        if self._snapshot is None:
            return 0
        state = self.state
        bound = state.lro + 1 if ignore_hint else truncation_record_bound(state)
        needed = [r.log_offset for r in self._retained if r.last_record >= bound]
        below = min([self._snapshot.covered_offset + 1, *needed])
        deleted = self._log.truncate(below)
        self._retained = [r for r in self._retained if r.log_offset >= below]
        return deleted
