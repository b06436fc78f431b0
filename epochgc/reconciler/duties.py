"""What a reconciler node does each round for the partitions it leads:
reconcile them (L0 to L1, with the retention hint and snapshots), track
the ones stuck on a missing or corrupt L0 object, keep idle ones moving
(``advance_epoch``), and publish the node report that carries each
partition's ``M(p)``.

The supervisor (``node.py``) runs these in its rounds loop; which
partitions are led is ``leadership.py``'s business.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from epochgc.errors import EpochGCError, L0UnreadableError
from epochgc.reconciler.leadership import Leadership, LedPartition
from epochgc.reconciler.leading_rules import idle_advance_due
from epochgc.reconciler.node_settings import NodeSettings, NodeStats
from epochgc.reconciler.reconcile import Reconciler
from epochgc.reconciler.retention import RetentionTargets, update_retention_hint
from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller, TopicInfo
from epochgc.watermarks.safe_epoch.reports import (
    NodeReporter,
    SafeEpochRule,
    StuckCause,
    publish_report,
)

log = logging.getLogger(__name__)


class NodeDuties:
    """The round's work on the led partitions (module docstring).

    Args:
        safe_epoch_rule: how the reports compute ``M(p)`` (the safe rule
            but in ``epochgc verify``'s unsafe test build).
        incarnation: the node lease's incarnation while it is valid, else
            ``None`` (no report is published then).
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        node_id: str,
        leadership: Leadership,
        controller: Controller,
        *,
        settings: NodeSettings,
        stats: NodeStats,
        monotonic: Callable[[], float],
        now: Callable[[], datetime],
        safe_epoch_rule: SafeEpochRule,
        incarnation: Callable[[], str | None],
    ) -> None:
        self._store = store
        self._root = root
        self._node_id = node_id
        self._leadership = leadership
        self._controller = controller
        self._settings = settings
        self._stats = stats
        self._monotonic = monotonic
        self._now = now
        self._safe_epoch_rule = safe_epoch_rule
        self._reconciler = Reconciler(store, root, max_records=settings.max_records_per_pass)
        self._last_report = float("-inf")
        self._incarnation = incarnation
        self._reporter = NodeReporter(store, root, node_id)

    async def reconcile_all(self, topics: Mapping[str, TopicInfo]) -> None:
        """One reconciliation pass over every led partition, at most
        ``reconcile_concurrency`` at once."""
        limit = asyncio.Semaphore(self._settings.reconcile_concurrency)

        async def one(key: PartitionId, led: LedPartition) -> None:
            async with limit:
                await self._reconcile(key, led, topics.get(key.topic))

        await asyncio.gather(*(one(k, led) for k, led in list(self._leadership.led.items())))

    async def _reconcile(
        self, key: PartitionId, led: LedPartition, topic: TopicInfo | None
    ) -> None:
        if not led.service.is_open or topic is None or topic.revision != key.revision:
            return
        leader = led.service.leader
        if led.stuck is not None:
            try:
                if await asyncio.to_thread(leader.check_foreign_entries):
                    return  # a partition skip landed: a new term replays it
            except EpochGCError as err:
                log.warning("%s: checking the log of %s failed: %s", self._node_id, key, err)
            if self._monotonic() < led.stuck_retry_at:
                return
        try:
            result = await asyncio.to_thread(self._reconciler.reconcile_once, leader)
            await asyncio.to_thread(
                update_retention_hint,
                leader,
                RetentionTargets.of(topic.config),
                self._now(),
                self._controller.epoch_started_at,
            )
            await asyncio.to_thread(
                leader.maybe_snapshot,
                self._settings.snapshot_every_entries,
                self._settings.max_log_entries,
            )
        except L0UnreadableError as err:
            self._mark_stuck(key, led, err)
            return
        except EpochGCError as err:
            self._stats.errors += 1
            log.warning("%s: reconciling %s failed: %s", self._node_id, key, err)
            return
        if led.stuck is not None:
            log.info("%s: %s is no longer stuck", self._node_id, key)
            led.stuck = None
        self._stats.records_reconciled += result.records
        self._stats.bytes_reconciled += result.bytes_written
        self._stats.l1_objects += 1 if result.l1_key else 0

    def _mark_stuck(self, key: PartitionId, led: LedPartition, err: L0UnreadableError) -> None:
        """Record why ``key`` cannot be reconciled; WARNING once per cause
        (not every retry), with the way out."""
        self._stats.errors += 1
        led.stuck_retry_at = self._monotonic() + self._settings.stuck_retry_seconds
        previous = led.stuck
        same = previous is not None and (
            previous.cause,
            previous.key,
            previous.first_offset,
            previous.last_offset,
        ) == (err.cause, err.key, err.first_record, err.last_record)
        if same:
            return
        led.stuck = StuckCause(
            err.cause, err.key, err.first_record, err.last_record, self._now(), err.detail
        )
        log.warning(
            "%s: %s is stuck: L0 object %s is %s (records %d..%d): %s; retrying every %gs. "
            "If it will not come back: epochgc partition skip %s %d --through %d "
            "--accept-data-loss",
            self._node_id,
            key,
            err.key,
            err.cause,
            err.first_record,
            err.last_record,
            err.detail,
            self._settings.stuck_retry_seconds,
            key.topic,
            key.partition,
            err.last_record,
        )

    def stuck_partitions(self) -> dict[PartitionId, StuckCause]:
        """The led partitions that cannot be reconciled now, with the cause."""
        return {
            pid: led.stuck
            for pid, led in list(self._leadership.led.items())
            if led.stuck is not None and led.service.is_open
        }

    async def housekeep(self, cluster_epoch: int) -> None:
        """Append ``advance_epoch`` to every fully reconciled partition
        whose ``M(p)`` has not moved for ``idle_interval_seconds``, so an
        idle partition does not pin ``M``."""
        now = self._monotonic()
        for key, led in list(self._leadership.led.items()):
            state = led.service.leader.replica.state
            if state.safe_epoch != led.last_safe_epoch:
                led.last_safe_epoch = state.safe_epoch
                led.safe_epoch_moved_at = now
                continue
            idle_for = now - led.safe_epoch_moved_at
            due = idle_advance_due(
                state,
                idle_for=idle_for,
                idle_seconds=self._settings.idle_interval_seconds,
                cluster_epoch=cluster_epoch,
            )
            if due and led.service.is_open:
                try:
                    await led.service.advance_epoch(cluster_epoch)
                except EpochGCError as err:
                    self._stats.errors += 1
                    log.warning("%s: housekeeping %s failed: %s", self._node_id, key, err)
                    continue
                self._stats.housekeeping_advances += 1
                led.safe_epoch_moved_at = now

    async def publish_report(self, live: set[PartitionId], *, force: bool = False) -> None:
        """Write the node report when one is due (or ``force``): the led
        partitions' ``M(p)``, plus the entries carried for partitions led
        before until another node covers them (``live``: the partitions of
        live topics)."""
        if not self._settings.publish_reports:
            return
        now = self._monotonic()
        if not force and now - self._last_report < self._settings.report_interval_seconds:
            return
        led = [
            (pid, led.service.leader.replica.state)
            for pid, led in sorted(self._leadership.led.items())
            if led.service.is_open
        ]
        report = await asyncio.to_thread(
            self._reporter.next_report,
            self._now(),
            led,
            live,
            incarnation=self._incarnation(),
            stuck=self.stuck_partitions(),
            rule=self._safe_epoch_rule,
        )
        if report is None:
            return  # no valid node lease: whoever holds it reports (NodeReporter)
        await asyncio.to_thread(publish_report, self._store, self._root, report)
        self._last_report = now
        self._stats.reports_published += 1
