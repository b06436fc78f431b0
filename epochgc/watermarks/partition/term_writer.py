"""The writer of one partition's log under one lease term (``TermWriter``),
and the pipeline of appends it keeps in flight.

The process holding a partition's lease writes its log through one
``TermWriter`` per term: it starts the term with a ``term_start`` entry,
stamps every command with its term and the next sequence number, gives it
the next log slot and puts it at once, with up to ``depth`` puts in flight;
puts settle head first, so an entry is applied only after every entry
before it. It lives apart from the replica (``replica.py``), which any
process may open to follow a log, because only the leader writes.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from epochgc.errors import (
    FencedError,
    StorageError,
)
from epochgc.runtime import SYSTEM, Future, Runtime
from epochgc.storage.cas_log import LogEntry
from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.partition.codec import (
    encode_command,
)
from epochgc.watermarks.partition.commands import (
    AdvanceReconciled,
    Command,
    SequencedCommand,
    SetAllowedLocalStartOffset,
    TermStart,
)
from epochgc.watermarks.partition.replica import AppliedEntry, PartitionReplica
from epochgc.watermarks.partition.state import (
    Outcome,
)
from epochgc.watermarks.partition.window import EpochWindow

log = logging.getLogger(__name__)


def _put_succeeded(item: _InFlightAppend) -> bool:
    put = item.put
    return put is not None and put.exception() is None and put.result() is True


@dataclass
class _InFlightAppend:
    """One append between submission and settlement."""

    slot: int
    command: Command
    payload: bytes
    result: Future[AppliedEntry]
    put: Future[bool] | None = None


class TermWriter:
    """Writes to one partition under a lease term.

    Appends stream: each command is stamped (term, next sequence number),
    given the next log slot and put at once, with up to ``depth`` puts in
    flight; puts settle head first, so an entry is applied (and its future
    resolved) only after every entry before it. The leader is the log's only
    writer for its term, so it applies its own entries as they settle and
    never needs to read them back. Any failure (a put that exhausted its
    retries, a slot another writer took, an entry replay ignores) ends the
    leader: the entry and every one behind it fail, and a new term, whose
    ``term_start`` supersedes whatever of them landed, must take over.

    Example::

        leader = TermWriter(replica, term=lease.term, check_lease=lease.check)
        leader.start()
        leader.append_all([Placeholders(0, 0, 42, batches)])
        leader.close()

    Args:
        replica: an opened replica.
        term: the lease term; must be above every term already in the log.
        check_lease: raises ``LeaseLostError`` when the lease is no longer
            held (its return value is ignored); called before every append
            so a deposed leader stops at once.
        depth: appends kept in flight.
    """

    def __init__(
        self,
        replica: PartitionReplica,
        term: int,
        *,
        check_lease: Callable[[], object] = lambda: None,
        depth: int = 8,
    ) -> None:
        if depth < 1:
            raise ValueError("depth must be >= 1")
        self.replica = replica
        runtime = replica.runtime
        self._runtime = runtime
        self.term = term
        self._check_lease = check_lease
        self._depth = depth
        self._next_seq = 1
        self._next_slot: int | None = None
        self._broken: BaseException | None = None
        # Stamping, slot assignment and settlement share one lock so that
        # sequence numbers and slots are handed out in the same order and
        # entries are applied in slot order.
        self._lock = runtime.lock()
        # Puts settle on a worker of their own (see ``_settle_loop``), woken
        # when a put finishes; it runs while puts are queued, so an idle or
        # abandoned leader holds no thread. ``close`` waits on the same
        # condition for it to end.
        self._put_done = runtime.condition(self._lock)
        self._settling = False
        self._inflight: collections.deque[_InFlightAppend] = collections.deque()
        # The stored snapshot this leader started from; with the one its
        # replica last wrote, the only ones it expects to find. Another
        # means another writer compacted the log (see ``_settle``).
        self._snapshot_etag: str | None = None
        self._executor = runtime.executor(
            depth, f"epochgc-leader-{replica.topic}-{replica.partition}"
        )

    def start(self) -> EpochWindow:
        """Begin the term: fill a hole a crashed writer left, or append
        ``term_start`` at the tail; return the applied window the seen
        window must start from.

        Raises:
            FencedError: the log already has this term or a newer one.
        """
        self._check_lease()
        replica = self.replica
        replica.catch_up()
        if replica.state.term >= self.term:
            raise FencedError(
                f"{replica.topic}/{replica.partition}: term {self.term} is not above "
                f"the log's term {replica.state.term}"
            )
        payload = encode_command(TermStart(self.term, self._runtime.new_id()))
        wrote_start = False
        for _ in range(16):
            if replica.state.term >= self.term:
                break
            slot = (
                replica.hole if replica.hole is not None else replica.state.applied_log_offset + 1
            )
            wrote_start = replica.log.append_at(slot, payload)
            replica.catch_up()
        if replica.state.term != self.term:
            raise FencedError(
                f"{replica.topic}/{replica.partition}: term {self.term} was superseded by "
                f"{replica.state.term}"
            )
        if not wrote_start:
            # Our term began at a rival's term_start (our bytes are unique):
            # two writers hold one term only if ownership broke; lead nothing.
            raise FencedError(
                f"{replica.topic}/{replica.partition}: term {self.term} was started by "
                "another writer"
            )
        with self._lock:
            self._next_seq = replica.state.last_seq + 1
            self._next_slot = replica.state.applied_log_offset + 1
            self._snapshot_etag = replica.snapshot_etag
        log.debug(  # the leader's owner says it leads, at INFO
            "%s/%d: leading at term %d, window %s",
            replica.topic,
            replica.partition,
            self.term,
            replica.applied_window(),
        )
        return replica.applied_window()

    def close(self) -> None:
        """Wait for appends in flight to settle, then release the threads."""
        self._executor.shutdown(wait=True)
        with self._lock:
            while self._settling:
                self._put_done.wait()

    def catch_up(self) -> list[AppliedEntry]:
        """Nothing to read: the leader applies its own entries as they
        settle, and no one else writes its log during its term."""
        return []

    def maybe_snapshot(self, every_entries: int, max_log_entries: int = 0) -> int:
        """The periodic step, under this leader's lock: once ``every_entries``
        entries have been applied since the last snapshot, snapshot and
        truncate; return how many entries were truncated (0 when it was not
        time yet). With ``max_log_entries`` > 0, a log longer than that is
        under space pressure: truncation then ignores the retention hint
        (never ``lro``).

        A snapshot write that finds another writer's snapshot in place ends
        the term: only a newer leader (or an operator's compaction) writes
        one, and the slots it truncated may take this leader's late puts.
        """
        with self._lock:
            replica = self.replica
            if self._broken is not None or not replica.snapshot_due(every_entries):
                return 0
            replica.write_snapshot()
            if replica.snapshot_etag not in self._expected_snapshots():
                self._broken = self._foreign_snapshot_error()
                log.warning("%s; this leader stops", self._broken)
                return 0
            return replica.truncate(ignore_hint=replica.under_space_pressure(max_log_entries))

    def _expected_snapshots(self) -> tuple[str | None, str | None]:
        """The stored snapshots this leader may find (under the lock)."""
        return self._snapshot_etag, self.replica.written_snapshot_etag

    def stamp(self, command: SequencedCommand) -> SequencedCommand:
        """``command`` with this leader's term and the next sequence number."""
        with self._lock:
            stamped = dataclasses.replace(command, term=self.term, seq=self._next_seq)
            self._next_seq += 1
            return stamped

    def submit(self, command: SequencedCommand) -> Future[AppliedEntry]:
        """Stamp ``command``, put it at the next slot, and return the future
        of how replay applied it (resolved head first).

        The future fails with ``FencedError`` / ``LeaseLostError`` when this
        leader can no longer write, or with the store's error when the put
        failed; in both cases the leader is finished.
        """
        result: Future[AppliedEntry] = self._runtime.future()
        with self._lock:
            if self._next_slot is None:
                raise RuntimeError("leader not started; call start() first")
            if self._broken is not None:
                result.set_exception(self._finished_error())
                return result
            try:
                self._check_lease()
            except Exception as err:
                self._broken = err
                result.set_exception(err)
                return result
            stamped = self.stamp(command)
            item = _InFlightAppend(self._next_slot, stamped, encode_command(stamped), result)
            self._next_slot += 1
            self._inflight.append(item)
            item.put = self._executor.submit(self.replica.log.append_at, item.slot, item.payload)
            if not self._settling:
                self._settling = True
                self._runtime.spawn(
                    f"epochgc-settle-{self.replica.topic}-{self.replica.partition}",
                    self._settle_loop,
                )
        item.put.add_done_callback(lambda _done: self._wake_settler())
        return result

    def _wake_settler(self) -> None:
        with self._lock:
            self._put_done.notify_all()

    def _settle_loop(self) -> None:
        """Settle finished puts, head first, until none is queued.

        A put that succeeded is acknowledged only after the stored snapshot
        is seen unchanged by a HEAD sent after the put finished: a newer
        leader that snapshotted and truncated the log freed the slots below
        its snapshot, and this leader's put into such a slot succeeds but is
        never replayed by anyone. With the snapshot unchanged, every slot
        the puts took was free because it was never written, and replay
        judges them as usual. One HEAD covers every put finished before it
        was sent, and puts go on meanwhile, so the check costs latency (one
        round trip per acknowledgement) but not throughput.
        """
        while True:
            with self._lock:
                while self._inflight and not self._head_done():
                    self._put_done.wait()
                if not self._inflight:
                    self._settling = False  # the next submit starts another
                    self._put_done.notify_all()  # ``close`` waits for this
                    return
                count = self._head_done()
                batch = list(itertools.islice(self._inflight, count))
                check = self._broken is None and any(_put_succeeded(i) for i in batch)
            unsafe = self._snapshot_check() if check else None
            with self._lock:
                if unsafe is not None and self._broken is None:
                    self._broken = unsafe
                    log.warning("%s; this leader stops", self._broken)
                for _ in range(count):
                    self._settle_one(self._inflight.popleft())

    def _head_done(self) -> int:
        """How many puts at the head of the queue finished (under the lock)."""
        count = 0
        for item in self._inflight:
            if item.put is None or not item.put.done():
                break
            count += 1
        return count

    def _snapshot_check(self) -> BaseException | None:
        """Why the puts just done may not be acknowledged, or ``None``: the
        stored snapshot is one this leader did not expect (checked against
        what it expects after the HEAD, so a snapshot it wrote meanwhile is
        its own), or the HEAD failed (the check could not be made)."""
        try:
            stored = self.replica.log.snapshot_etag()
        except Exception as err:
            return StorageError(
                f"{self.replica.topic}/{self.replica.partition}: cannot check the snapshot "
                f"before acknowledging: {err}"
            )
        with self._lock:
            if stored not in self._expected_snapshots():
                return self._foreign_snapshot_error()
        return None

    def _foreign_snapshot_error(self) -> FencedError:
        return FencedError(
            f"{self.replica.topic}/{self.replica.partition}: another writer snapshotted the "
            f"log during term {self.term} (a newer leader, or an operator's compaction)"
        )

    def _settle_one(self, item: _InFlightAppend) -> None:
        if self._broken is not None:
            item.result.set_exception(self._finished_error())
            return
        assert item.put is not None
        try:
            ours = item.put.result()
        except Exception as err:
            self._fail(item, err)
            return
        if not ours:
            self._fail(
                item,
                FencedError(
                    f"{self.replica.topic}/{self.replica.partition}: slot {item.slot} was "
                    f"taken by another writer during term {self.term}"
                ),
            )
            return
        entry = self.replica.apply_known([LogEntry(item.slot, item.payload)], [item.command])[0]
        if entry.result.outcome in (Outcome.IGNORED_STALE_TERM, Outcome.IGNORED_UNSTARTED_TERM):
            self._fail(
                item,
                FencedError(
                    f"{self.replica.topic}/{self.replica.partition}: entry {item.slot} of "
                    f"term {self.term} ignored ({entry.result.outcome.value})"
                ),
            )
            return
        item.result.set_result(entry)

    def _fail(self, item: _InFlightAppend, error: BaseException) -> None:
        log.warning(
            "%s/%d: leader of term %d stops: %s",
            self.replica.topic,
            self.replica.partition,
            self.term,
            error,
        )
        self._broken = error
        item.result.set_exception(error)

    def check_foreign_entries(self) -> bool:
        """True, and this leader is finished, if an entry it did not write
        sits at its next slot (an operator's ``partition skip`` appends a
        ``records_lost`` right after the tail it read). A leader that is
        appending finds out when its put loses the slot; one that is not
        (a stuck partition: nothing to reconcile, no writes) calls this,
        one LIST, so its owner starts a new term whose replay sees the
        entry. False while appends are in flight (they settle it)."""
        with self._lock:
            if self._broken is not None:
                return True
            if self._next_slot is None or self._inflight:
                return False
            slot = self._next_slot
        if self.replica.log.tail() < slot:
            return False
        with self._lock:
            if self._broken is None and not self._inflight and self._next_slot == slot:
                self._broken = FencedError(
                    f"{self.replica.topic}/{self.replica.partition}: log offset {slot} was "
                    f"written by another writer during term {self.term}"
                )
                log.warning("%s; this leader stops", self._broken)
            return self._broken is not None

    @property
    def is_broken(self) -> bool:
        """True once an append failed: this term is spent, whoever appended
        (the write path or the reconciler); the owner must start a new one."""
        return self._broken is not None

    def _finished_error(self) -> FencedError:
        return FencedError(
            f"{self.replica.topic}/{self.replica.partition}: leader of term {self.term} "
            f"stopped after a failed append ({self._broken}); start a new term"
        )

    def append_each(
        self, commands: Sequence[SequencedCommand]
    ) -> tuple[list[AppliedEntry], BaseException | None]:
        """Submit ``commands`` in order and wait; return how replay applied
        the leading ones that made it, and the error that stopped the rest
        (``None`` if all did)."""
        futures = [self.submit(c) for c in commands]
        errors = [future.exception() for future in futures]  # waits for every one
        applied: list[AppliedEntry] = []
        for future, error in zip(futures, errors, strict=True):
            if error is not None:
                return applied, error
            applied.append(future.result())
        return applied, None

    def append_all(self, commands: Sequence[SequencedCommand]) -> list[AppliedEntry]:
        """Submit ``commands`` in order and wait for all of them.

        Raises:
            LeaseLostError / FencedError: no longer the leader.
            RetriesExhaustedError: the store kept failing.
        """
        applied, error = self.append_each(commands)
        if error is not None:
            raise error
        return applied

    # --- convenience for the reconciler ------------------------------------

    def advance_reconciled(self, lro: int, log_offset: int) -> AppliedEntry:
        """Record reconciler progress."""
        return self.append_all([AdvanceReconciled(0, 0, lro, log_offset)])[0]

    def set_allowed_local_start_offset(self, offset: int | None) -> AppliedEntry:
        """Record the reconciler's retention hint."""
        return self.append_all([SetAllowedLocalStartOffset(0, 0, offset)])[0]


def start_leading(
    store: ObjectStore,
    root: str,
    pid: PartitionId,
    term: int,
    *,
    raise_term: Callable[[int], int | None],
    still_owned: Callable[[int], object],
    depth: int = 8,
    runtime: Runtime = SYSTEM,
) -> TermWriter | None:
    """Lead ``pid`` at ``term``: open its replica, start a term above every
    term its log holds, and return the started writer; ``None`` when the
    term could not be raised now (the caller tries again next round).

    Why one call: opening the log, fencing an older leader's late entries
    with a higher term and starting the pipeline are one protocol step, and
    the node, the simulation and the tests must take it the same way.

    Args:
        term: the term the ownership record gives the node.
        raise_term: called with the highest term the log holds when it is
            not below ``term`` (an old leader's, a spent term of ours);
            returns the record's new, higher term, or ``None``.
        still_owned: called with the final term before every append;
            raises ``LeaseLostError`` once the partition is not ours at it.
        depth: appends kept in flight.
        runtime: the writer's locks, workers and nonces.

    Raises:
        EpochGCError: the log could not be opened or the term not started.
    """
    replica = PartitionReplica(store, root, pid, runtime=runtime)
    replica.open()
    if replica.state.term >= term:
        raised = raise_term(replica.state.term)
        if raised is None:
            return None
        term = raised
    final = term
    writer = TermWriter(replica, final, check_lease=lambda: still_owned(final), depth=depth)
    writer.start()
    return writer
