"""The global safe epoch ``M`` (docs/architecture.md, "The safe
epoch M"). The join is pure.

``M = min(snap, min over live partitions of M(p))`` where ``snap`` is the
controller offset the topic snapshot was taken at, ``M(p)`` is the highest
value any node reported for the partition (values only grow, so the highest
is the freshest and a stale one is merely conservative), and a partition
with no report counts as ``revision - 1`` (nothing of it can be collected
before it exists). With no live topics, ``M = snap``: objects of deleted
topics are still collected. Report entries for partitions that are not live
(deleted topics, another incarnation of a live name, partitions beyond the
count, topics created after the snapshot) are ignored: they cannot lower
``M`` wrongly and must not raise it. A topic created after ``snap`` has
revision ``> snap >= M``, so its data is protected without being listed.

``SafeEpochTracker`` keeps ``M`` monotone within a process: an input that
would lower it is logged and ignored, and repeated untrusted inputs (content
that does not parse, an unknown ``v``; never a store error) put the
collector into ``safety_blocked``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from epochgc.storage.keys import PartitionId
from epochgc.watermarks.controller import ControllerView
from epochgc.watermarks.safe_epoch.reports import NodeReport, StuckCause

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionWatermark:
    """One live partition's ``M(p)`` and where it came from."""

    topic: str
    partition: int
    safe_epoch: int
    node: str | None
    """The reporting node; ``None`` when no node reported it (revision - 1)."""
    revision: int = 0
    """The topic incarnation (0 only in hand-built test values)."""
    stuck: StuckCause | None = None
    """Why its reconciliation cannot move, as the reporting node said."""
    lro: int | None = None
    """Its last reconciled record offset, as reported."""


@dataclass(frozen=True)
class SafeEpoch:
    """The result of one join."""

    safe_epoch: int
    controller_offset: int
    pinning: tuple[PartitionWatermark, ...]
    """The partitions with the lowest ``M(p)`` (at most ``k``), lowest first."""
    partitions: int
    unreported: int
    oldest_report_at: datetime | None


def join_safe_epoch(
    view: ControllerView, reports: Iterable[NodeReport], *, k: int = 10
) -> SafeEpoch:
    """Compute ``M`` from a controller snapshot and node reports. Pure."""
    best: dict[PartitionId, tuple[int, str, StuckCause | None, int]] = {}
    oldest: datetime | None = None
    for report in reports:
        if oldest is None or report.generated_at < oldest:
            oldest = report.generated_at
        for entry in report.partitions:
            topic = view.topics.get(entry.topic)
            if (
                topic is None
                or topic.revision != entry.revision
                or not 0 <= entry.partition < topic.partitions
            ):
                continue
            # Keyed by the live incarnation: the revision check above is the
            # one guard that keeps an entry measured on a deleted incarnation
            # of the name (a node that has not seen the delete yet) from
            # counting for the new one.
            key = topic.partition_id(entry.partition)
            if key not in best or entry.safe_epoch > best[key][0]:
                best[key] = (entry.safe_epoch, report.node, entry.stuck, entry.lro)
    watermarks: list[PartitionWatermark] = []
    unreported = 0
    for topic in view.topics.values():
        for pid in topic.partition_ids():
            reported = best.get(pid)
            if reported is None:
                unreported += 1
                watermarks.append(
                    PartitionWatermark(
                        topic.name, pid.partition, topic.revision - 1, None, topic.revision
                    )
                )
            else:
                # A report can never vouch for less than the floor every
                # partition starts at; never more than the snapshot either.
                value = max(reported[0], topic.revision - 1)
                watermarks.append(
                    PartitionWatermark(
                        topic.name,
                        pid.partition,
                        value,
                        reported[1],
                        topic.revision,
                        stuck=reported[2],
                        lro=reported[3],
                    )
                )
    watermarks.sort(key=lambda w: (w.safe_epoch, w.topic, w.partition))
    lowest = watermarks[0].safe_epoch if watermarks else view.offset
    return SafeEpoch(
        safe_epoch=min(view.offset, lowest),
        controller_offset=view.offset,
        pinning=tuple(watermarks[:k]),
        partitions=len(watermarks),
        unreported=unreported,
        oldest_report_at=oldest,
    )


class SafeEpochTracker:
    """Keeps ``M`` from ever going backwards in this process.

    Example::

        tracker = SafeEpochTracker()
        m = tracker.observe(join_safe_epoch(view, reports)).safe_epoch

    Args:
        blocked_after: consecutive untrusted computations (a controller
            entry that does not parse, an unknown ``v``) after which the
            collector is ``safety_blocked``. Store errors are not counted:
            they say nothing about the content.
    """

    def __init__(self, *, blocked_after: int = 3) -> None:
        self._highest: SafeEpoch | None = None
        self._failures = 0
        self._last_error = ""
        self._blocked_after = blocked_after
        self.regressions_ignored = 0

    @property
    def current(self) -> SafeEpoch | None:
        return self._highest

    @property
    def is_blocked(self) -> bool:
        return self._failures >= self._blocked_after

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    @property
    def last_error(self) -> str:
        """The cause of the last untrusted computation (one line), or ``""``."""
        return self._last_error

    def observe(self, result: SafeEpoch) -> SafeEpoch:
        """Accept a new join; return what the collector may use (never lower
        than before)."""
        self._failures = 0
        previous = self._highest
        if previous is not None and result.safe_epoch < previous.safe_epoch:
            self.regressions_ignored += 1
            log.warning(
                "computed M=%d is below the M=%d already used; keeping %d "
                "(a stale or lost report?)",
                result.safe_epoch,
                previous.safe_epoch,
                previous.safe_epoch,
            )
            return previous
        self._highest = result
        return result

    def reset_failures(self) -> None:
        """Forget the failures (an operator's ``gc reset``); the highest
        ``M`` is kept, so ``M`` still never goes backwards."""
        self._failures = 0

    def failed(self, error: BaseException) -> None:
        """Record a computation that could not be trusted."""
        self._failures += 1
        self._last_error = f"{type(error).__name__}: {error}"
        log.warning(
            "could not compute M (%d in a row%s): %s",
            self._failures,
            ", collector safety_blocked" if self.is_blocked else "",
            error,
        )
