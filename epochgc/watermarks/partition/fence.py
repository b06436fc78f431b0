"""The leader's epoch fence: an asyncio driver around ``EpochWindow``.

``admit(epoch)`` is a reader-writer lock keyed by epoch:

* an epoch inside the seen window takes *shared* access; any number of
  writes of admitted epochs proceed together;
* an epoch above the window takes *exclusive* access: it waits until every
  shared holder has released (their appends are queued ahead of it), then
  re-checks (another request may have moved the window meanwhile), slides
  the window, and demotes itself to shared;
* an epoch below the window raises ``StaleEpochError`` carrying the window.

Waiting slides have priority over newly arriving shared requests, so a
steady stream of writes cannot starve the window. Every waiter re-checks
the window when it wakes, so a request is judged against the window at the
moment it is admitted, not the one it first saw.

A holder releases after its append has been queued in the partition's
pipeline, which keeps every older-epoch append ahead of the first append
that raises the applied window. The seen window is volatile: a new leader
starts it from the applied window. The durable guard is the apply-time
check in ``state.apply``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from epochgc.errors import StaleEpochError
from epochgc.watermarks.partition.window import EpochWindow, Position


@dataclass
class FenceStats:
    """Counters for metrics (read by the metrics layer at scrape time)."""

    accepted_same_epoch: int = 0
    """Admitted inside the window without moving it."""
    accepted_new_epoch: int = 0
    """Admitted by sliding the window."""
    rejected_below: int = 0
    window_slides: int = 0
    last_rejection_gap: int = 0
    """``window.previous - epoch`` of the most recent rejection."""


class EpochFence:
    """The seen window of one partition leader and its admission lock.

    Example::

        fence = EpochFence(EpochWindow(40, 41))
        async with fence.admit(42) as window:   # slides to [41, 42]
            await pipeline.enqueue(placeholders)
    """

    def __init__(self, window: EpochWindow) -> None:
        self._window = window
        self._shared = 0
        self._slides_waiting = 0
        self._waiters: list[asyncio.Future[None]] = []
        self.stats = FenceStats()

    @property
    def window(self) -> EpochWindow:
        """The current seen window."""
        return self._window

    async def acquire(self, epoch: int) -> EpochWindow:
        """Take shared access for ``epoch``; return the window it was admitted under.

        Every decision runs without an await between the check and the
        state change (one event loop, so no lock is needed); a request that
        must wait parks on a future and re-checks when woken.

        Raises:
            StaleEpochError: ``epoch`` is below the window (now, or after waiting).
        """
        while True:
            position = self._window.position(epoch)
            if position is Position.BELOW:
                self._reject(epoch)
            if position is Position.INSIDE:
                if self._slides_waiting == 0:
                    self._shared += 1
                    self.stats.accepted_same_epoch += 1
                    return self._window
                await self._changed()
                continue
            # Above the window: exclusive access (no shared holder left),
            # then re-check, since the window may have moved meanwhile.
            if self._shared:
                self._slides_waiting += 1
                try:
                    await self._changed()
                finally:
                    self._slides_waiting -= 1
                    if self._slides_waiting == 0:
                        self._wake_all()  # shared requests held back by this slide
                continue
            self._window = self._window.slide(epoch)
            self.stats.window_slides += 1
            self.stats.accepted_new_epoch += 1
            # The slide is the exclusive step; it runs with no await, then
            # the request demotes to shared at once.
            self._shared += 1
            self._wake_all()
            return self._window

    def release(self) -> None:
        """Give back shared access. Synchronous on purpose: it cannot be
        cancelled half-way, so a caller cancelled while it held access (a
        producer's timeout) never leaks a holder that would block every
        later slide of the window."""
        if self._shared <= 0:
            raise RuntimeError("release without acquire")
        self._shared -= 1
        if self._shared == 0:
            self._wake_all()

    async def _changed(self) -> None:
        """Wait until the next change of the window or of the holders."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _wake_all(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @asynccontextmanager
    async def admit(self, epoch: int) -> AsyncIterator[EpochWindow]:
        """``acquire`` / ``release`` around a block."""
        window = await self.acquire(epoch)
        try:
            yield window
        finally:
            self.release()

    def _reject(self, epoch: int) -> None:
        self.stats.rejected_below += 1
        self.stats.last_rejection_gap = self._window.previous - epoch
        raise StaleEpochError(epoch, self._window.previous, self._window.max)
