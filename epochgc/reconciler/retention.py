"""The retention hint: how much reconciled history a partition log keeps.

A topic may ask to keep recent records readable from the partition log (and
their L0 objects) even after they are in L1: ``retention.local.target.bytes``
and ``retention.local.target.ms`` in its ``create_topic`` config. The
reconciler, the only writer of ``set_allowed_local_start_offset``, turns them
into a record offset: records below it may leave the log. With no target
the hint is ``None``, which means "truncate up to lro". Records are dropped
when either target says so (the larger offset wins), and never above
``lro``: unreconciled records are not the hint's to give away.

``retention_hint`` is pure; ``update_retention_hint`` appends the result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from epochgc.watermarks.partition.codec import RetainedPlaceholder
from epochgc.watermarks.partition.term_writer import TermWriter

log = logging.getLogger(__name__)

TARGET_BYTES = "retention.local.target.bytes"
TARGET_MS = "retention.local.target.ms"


@dataclass(frozen=True)
class RetentionTargets:
    """A topic's local retention targets (``None``: not set)."""

    target_bytes: int | None = None
    target_ms: int | None = None

    @property
    def is_set(self) -> bool:
        return self.target_bytes is not None or self.target_ms is not None

    @staticmethod
    def of(config: Mapping[str, Any]) -> RetentionTargets:
        """Read the targets from a topic config; a value that is not a
        non-negative integer is ignored (logged), never guessed at."""
        return RetentionTargets(_target(config, TARGET_BYTES), _target(config, TARGET_MS))


def _target(config: Mapping[str, Any], name: str) -> int | None:
    value = config.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        log.warning("ignoring topic config %s=%r: not a non-negative integer", name, value)
        return None
    return value


def retention_hint(
    retained: Sequence[RetainedPlaceholder],
    lro: int,
    targets: RetentionTargets,
    now: datetime,
    epoch_started_at: Callable[[int], datetime | None],
) -> int | None:
    """The first record offset the log should keep, or ``None`` without targets.

    Args:
        retained: accepted placeholders still in the log, oldest first.
        lro: last reconciled record offset.
        epoch_started_at: when an epoch began; unknown epochs count as new
            (kept), the safe direction for a retention decision.
    """
    if not targets.is_set:
        return None
    reconciled = [r for r in retained if r.last_record <= lro]
    keep_from = lro + 1
    candidates = []
    if targets.target_bytes is not None:
        candidates.append(_keep_by_bytes(reconciled, targets.target_bytes, keep_from))
    if targets.target_ms is not None:
        cutoff = now - timedelta(milliseconds=targets.target_ms)
        candidates.append(_keep_by_age(reconciled, cutoff, epoch_started_at, keep_from))
    return max(candidates)


def _keep_by_bytes(reconciled: Sequence[RetainedPlaceholder], budget: int, keep_from: int) -> int:
    total = 0
    for placeholder in reversed(reconciled):
        total += placeholder.byte_length
        if total > budget:
            break
        keep_from = placeholder.first_record
    return keep_from


def _keep_by_age(
    reconciled: Sequence[RetainedPlaceholder],
    cutoff: datetime,
    epoch_started_at: Callable[[int], datetime | None],
    keep_from: int,
) -> int:
    for placeholder in reversed(reconciled):
        started = epoch_started_at(placeholder.epoch)
        if started is not None and started < cutoff:
            break
        keep_from = placeholder.first_record
    return keep_from


def update_retention_hint(
    leader: TermWriter,
    targets: RetentionTargets,
    now: datetime,
    epoch_started_at: Callable[[int], datetime | None],
) -> int | None:
    """Recompute the hint and append ``set_allowed_local_start_offset`` if it
    changed (a target removed from the config clears it); return the hint."""
    replica = leader.replica
    state = replica.state
    hint = retention_hint(replica.retained, state.lro, targets, now, epoch_started_at)
    if hint != state.allowed_local_start_offset:
        leader.set_allowed_local_start_offset(hint)
    return hint
