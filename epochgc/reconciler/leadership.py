"""The partitions a reconciler node leads: starting to lead the ones it
owns, stepping down from the ones it no longer owns or whose writer
failed, and the leader services it serves producers through.

A node leads exactly what its ownership records give it (``owned()``):
leading one partition is one call into the partition layer
(``term_writer.start_leading``: open the log, start a term above every
term it holds, start the pipeline), after which the partition's leader
service is registered with the directory producers look leaders up in.
The supervisor (``node.py``) decides when; this module knows how.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from epochgc.errors import EpochGCError, LeaseLostError
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.reconciler.leading_rules import NOT_OWNED, step_down_reason, to_lead
from epochgc.reconciler.node_settings import NodeSettings, NodeStats
from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.partition.leader import PartitionLeaderService
from epochgc.watermarks.partition.term_writer import start_leading
from epochgc.watermarks.safe_epoch.reports import StuckCause
from epochgc.wording import counted

log = logging.getLogger(__name__)


@dataclass
class LedPartition:
    """One partition this node leads, and what the round's duties keep
    about it between rounds."""

    service: PartitionLeaderService
    term: int
    last_safe_epoch: int
    safe_epoch_moved_at: float
    stuck: StuckCause | None = None
    stuck_retry_at: float = 0.0


class Leadership:
    """Leads the partitions a node owns, and only those.

    Args:
        raise_term_wait_seconds: how long starting to lead waits for the
            ownership loop to raise a record's term (the records are that
            loop's too; a hung round of it must not hang the caller).
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        node_id: str,
        ownership: NodeOwnership,
        directory: LeaderDirectory,
        *,
        settings: NodeSettings,
        stats: NodeStats,
        monotonic: Callable[[], float],
        raise_term_wait_seconds: float,
    ) -> None:
        self._store = store
        self._root = root
        self._node_id = node_id
        self._ownership = ownership
        self._directory = directory
        self._settings = settings
        self._stats = stats
        self._monotonic = monotonic
        self._raise_term_wait_seconds = raise_term_wait_seconds
        self.led: dict[PartitionId, LedPartition] = {}

    def partitions(self) -> list[PartitionId]:
        """The partitions led now, sorted."""
        return sorted(self.led)

    def services(self) -> list[PartitionLeaderService]:
        """The leader services of the partitions led now (for metrics)."""
        return [led.service for led in list(self.led.values())]

    async def lead_new(self, live: set[PartitionId]) -> None:
        """Start leading every partition owned but not led yet, several at
        once (``reconcile_concurrency``): opening a replica and writing its
        ``term_start`` is a few requests each, and a node taking over a
        dead node's hundred partitions must not do them one after another."""
        limit = asyncio.Semaphore(self._settings.reconcile_concurrency)

        async def one(pid: PartitionId) -> None:
            async with limit:
                await self._try_lead(pid)

        new = sorted(to_lead(self._ownership.owned(), self.led, live))
        await asyncio.gather(*(one(pid) for pid in new))

    async def drop_lost(self, live: set[PartitionId]) -> None:
        """Step down from every partition whose topic is gone, that is no
        longer ours at the term we lead it at, or whose writer failed."""
        for key, led in list(self.led.items()):
            reason = step_down_reason(
                key,
                led_term=led.term,
                owned_term=self._ownership.term(key),
                writer_open=led.service.is_open,
                live=live,
            )
            if reason == NOT_OWNED:
                self._stats.lost_leaderships += 1
            if reason is not None:
                await self.step_down(key, reason)

    async def step_down(self, key: PartitionId, reason: str, *, quiet: bool = False) -> None:
        """Stop leading ``key`` (unregister its service, then stop it);
        ``quiet``: its line at DEBUG (``step_down_all`` says it once)."""
        led = self.led.pop(key, None)
        if led is None:
            return
        await self._directory.unregister(led.service)
        await led.service.stop(reason)
        self._retire(led.service)
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "%s: stopped leading %s: %s",
            self._node_id,
            key,
            reason,
        )

    async def step_down_all(self, reason: str) -> None:
        """Stop leading everything (the node stops or lets go): one line,
        not one per partition."""
        keys = list(self.led)
        for key in keys:
            await self.step_down(key, reason, quiet=True)
        if keys:
            log.info(
                "%s: stopped leading %s: %s",
                self._node_id,
                counted(len(keys), "partition"),
                reason,
            )

    def _retire(self, service: PartitionLeaderService) -> None:
        fence, retired = service.fence.stats, self._stats.retired_fence
        retired.accepted_same_epoch += fence.accepted_same_epoch
        retired.accepted_new_epoch += fence.accepted_new_epoch
        retired.rejected_below += fence.rejected_below
        retired.window_slides += fence.window_slides
        self._stats.retired_appends += service.stats.appended

    def _check_owned(self, pid: PartitionId, term: int) -> None:
        """The writer's guard before every append: still ours, at ``term``."""
        if self._ownership.term(pid) != term:
            raise LeaseLostError(f"{pid} is no longer owned by {self._node_id} at term {term}")

    def _raise_term(self, pid: PartitionId, highest_in_log: int) -> int | None:
        return self._ownership.raise_term(
            pid, highest_in_log, wait_seconds=self._raise_term_wait_seconds
        )

    async def _try_lead(self, pid: PartitionId) -> None:
        term = self._ownership.term(pid)
        if term is None:
            return
        try:
            writer = await asyncio.to_thread(
                start_leading,
                self._store,
                self._root,
                pid,
                term,
                raise_term=functools.partial(self._raise_term, pid),
                still_owned=functools.partial(self._check_owned, pid),
                depth=self._settings.append_depth,
            )
        except EpochGCError as err:
            self._stats.errors += 1
            log.warning("%s: could not lead %s: %s", self._node_id, pid, err)
            return
        if writer is None:
            return
        service = PartitionLeaderService(writer)
        service.start()
        await self._directory.register(service)
        state = writer.replica.state
        self.led[pid] = LedPartition(service, writer.term, state.safe_epoch, self._monotonic())
        self._stats.leaderships += 1
        log.info("%s: leading %s at term %d", self._node_id, pid, writer.term)
