"""The leader's side of the write path: fence, queue, pipelined append.

Producers call ``submit(term, epoch, batch)``. The request is checked
against the leader term the producer observed (a different term is
``NotLeaderError``: find the new leader and replay), admitted by the epoch
fence (``StaleEpochError`` below the window: refresh the epoch, re-upload),
and queued while it still holds shared fence access, so every append of an
older epoch is queued ahead of the first append of a newer one. ``submit``
returns once the request is queued; its future resolves when the
placeholder is applied, with the first record offset it was given.

One drain task hands queued commands to the leader in queue order; the
leader keeps up to its depth of puts in flight continuously (a sliding
window, not batch after batch) and settles them head first, and each
producer future is settled from its entry's outcome. After a failed append
the leader is finished: every pending and later request fails with
``NotLeaderError`` and the producer replays them, in order, against the
next leader. Housekeeping goes through the same queue and fence so it can
never overtake a write.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass

from epochgc.errors import NotLeaderError, StaleEpochError
from epochgc.watermarks.partition.commands import (
    AdvanceEpoch,
    PlaceholderBatch,
    Placeholders,
    SequencedCommand,
)
from epochgc.watermarks.partition.fence import EpochFence
from epochgc.watermarks.partition.replica import AppliedEntry
from epochgc.watermarks.partition.state import Outcome
from epochgc.watermarks.partition.term_writer import TermWriter

log = logging.getLogger(__name__)


@dataclass
class _Queued:
    command: SequencedCommand
    future: asyncio.Future[int]


@dataclass
class LeaderStats:
    """Counters for metrics."""

    appended: int = 0
    rejected_stale: int = 0
    failed: int = 0


class PartitionLeaderService:
    """Serves placeholder appends for one partition this process leads.

    Example::

        leader.start()
        service = PartitionLeaderService(leader)
        service.start()
        future = await service.submit(service.term, epoch, batch)
        first_offset = await future

    Args:
        leader: a started ``TermWriter``; the fence starts from its
            applied window.
    """

    def __init__(self, leader: TermWriter) -> None:
        self.leader = leader
        self._fence = EpochFence(leader.replica.applied_window())
        self._queue: list[_Queued] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed: Exception | None = None
        self.stats = LeaderStats()

    @property
    def term(self) -> int:
        return self.leader.term

    @property
    def topic(self) -> str:
        return self.leader.replica.topic

    @property
    def partition(self) -> int:
        return self.leader.replica.partition

    @property
    def fence(self) -> EpochFence:
        return self._fence

    @property
    def is_open(self) -> bool:
        """Serving: not stopped, and its leader's term not spent by a failed
        append (through this service or by the reconciler directly)."""
        return self._closed is None and not self.leader.is_broken

    def start(self) -> None:
        """Start the drain task (call from the event loop)."""
        if self._task is not None:
            raise RuntimeError("leader service already started")
        self._task = asyncio.get_running_loop().create_task(
            self._drain(), name=f"epochgc-leader-{self.topic}-{self.partition}"
        )

    async def stop(self, reason: str = "leader stopped") -> None:
        """Fail everything queued, let appends in flight settle, and stop;
        idempotent."""
        self._close(NotLeaderError(f"{self.topic}/{self.partition}: {reason}"))
        task, self._task = self._task, None
        if task is not None:
            self._wakeup.set()
            await task
            await asyncio.to_thread(self.leader.close)

    async def submit(self, term: int, epoch: int, batch: PlaceholderBatch) -> asyncio.Future[int]:
        """Fence and queue one placeholder; return the future of its first
        record offset.

        Raises:
            NotLeaderError: wrong term, or this leader has stopped.
            StaleEpochError: ``epoch`` is below the seen window.
        """
        return await self._submit(term, epoch, Placeholders(0, 0, epoch, (batch,)))

    async def advance_epoch(self, epoch: int) -> None:
        """Housekeeping for an idle partition: fence ``epoch`` like a write
        and append ``advance_epoch``."""
        future = await self._submit(self.term, epoch, AdvanceEpoch(0, 0, epoch))
        await future

    async def _submit(
        self, term: int, epoch: int, command: SequencedCommand
    ) -> asyncio.Future[int]:
        self._check_open(term)
        async with self._fence.admit(epoch):
            self._check_open(term)
            future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._queue.append(_Queued(command, future))
            self._wakeup.set()
        return future

    def _check_open(self, term: int) -> None:
        if self._closed is not None:
            raise NotLeaderError(f"{self.topic}/{self.partition}: {self._closed}")
        if term != self.term:
            raise NotLeaderError(
                f"{self.topic}/{self.partition}: request for term {term}, leader is at {self.term}"
            )

    async def _drain(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                if self._closed is not None:
                    self._fail_queued()
                    return
                queued = self._queue.pop(0)
                # Quick: stamps, takes the next slot and starts the put; the
                # leader keeps up to its depth of puts in flight.
                pending = asyncio.wrap_future(self.leader.submit(queued.command))
                pending.add_done_callback(functools.partial(self._settled, queued))
            if self._closed is not None:
                return

    def _settled(self, queued: _Queued, pending: asyncio.Future[AppliedEntry]) -> None:
        if queued.future.done():
            return
        error = pending.exception()
        if error is not None:
            self.stats.failed += 1
            queued.future.set_exception(
                NotLeaderError(f"{self.topic}/{self.partition}: append failed: {error}")
            )
            if self._closed is None:
                log.warning(
                    "%s/%d: leader of term %d stops after a failed append: %s",
                    self.topic,
                    self.partition,
                    self.term,
                    error,
                )
                self._close(NotLeaderError(str(error)))
            return
        entry = pending.result()
        if entry.result.outcome is Outcome.APPLIED:
            self.stats.appended += 1
            first = entry.result.first_record_offset
            queued.future.set_result(first if first is not None else -1)
        elif entry.result.outcome is Outcome.REJECTED_STALE_EPOCH:
            self.stats.rejected_stale += 1
            window = self.leader.replica.applied_window()
            epoch = getattr(queued.command, "epoch", -1)
            queued.future.set_exception(StaleEpochError(epoch, window.previous, window.max))
        else:
            self.stats.failed += 1
            queued.future.set_exception(
                NotLeaderError(
                    f"{self.topic}/{self.partition}: not applied ({entry.result.outcome.value})"
                )
            )

    def _close(self, error: Exception) -> None:
        if self._closed is None:
            self._closed = error
        self._wakeup.set()

    def _fail_queued(self) -> None:
        queued, self._queue = self._queue, []
        for item in queued:
            if not item.future.done():
                self.stats.failed += 1
                item.future.set_exception(
                    NotLeaderError(f"{self.topic}/{self.partition}: {self._closed}")
                )
