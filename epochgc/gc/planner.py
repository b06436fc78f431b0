"""Turning one page of a shard listing into deletions. Pure.

Keys of one shard sort by epoch, so the first parsed key above ``M`` ends
the shard: everything after it is newer. Keys that do not parse are
counted and skipped wherever they sort.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from epochgc.gc.eligibility import Verdict, judge
from epochgc.storage.object_store import ObjectInfo

_KEPT = (Verdict.TOO_YOUNG, Verdict.ABOVE_SAFE_EPOCH)


@dataclass(frozen=True)
class PagePlan:
    """What to do with one listing page."""

    eligible: tuple[ObjectInfo, ...]
    verdicts: Counter[Verdict] = field(default_factory=Counter)
    stop: bool = False
    """A key above ``M`` was reached: the shard is done."""
    listed: int = 0
    youngest_too_young: datetime | None = None
    """The latest ``last_modified`` among too-young objects (when the next
    round could find them old enough)."""
    lowest_kept_epoch: int | None = None
    """The lowest epoch among the parseable keys judged and kept (too young
    or above ``M``): what is left of the shard starts there."""
    unparseable: tuple[str, ...] = ()
    """The keys judged that do not parse as L0 keys (never deleted): a
    run names a few, so that a writer using its own names under
    ``{root}/l0/`` is seen, not only counted."""


def plan_page(
    page: Sequence[ObjectInfo],
    *,
    root: str,
    safe_epoch: int,
    now: datetime,
    min_age: timedelta,
    stop_at_safe_epoch: bool = True,
) -> PagePlan:
    """Judge a page in key order, stopping at the first key above ``M``
    (or, with ``stop_at_safe_epoch=False``, judging every key: a full count
    for the delete-fraction guard)."""
    eligible: list[ObjectInfo] = []
    verdicts: Counter[Verdict] = Counter()
    youngest: datetime | None = None
    lowest: int | None = None
    unparseable: list[str] = []
    listed = 0
    for info in page:
        listed += 1
        verdict, parsed = judge(
            info.key, info.last_modified, root=root, safe_epoch=safe_epoch, now=now, min_age=min_age
        )
        verdicts[verdict] += 1
        if parsed is not None and verdict in _KEPT and (lowest is None or parsed.epoch < lowest):
            lowest = parsed.epoch
        if verdict is Verdict.ELIGIBLE:
            eligible.append(info)
        elif verdict is Verdict.TOO_YOUNG:
            if youngest is None or info.last_modified > youngest:
                youngest = info.last_modified
        elif verdict is Verdict.UNPARSEABLE:
            unparseable.append(info.key)
        elif verdict is Verdict.ABOVE_SAFE_EPOCH and stop_at_safe_epoch:
            return PagePlan(
                tuple(eligible), verdicts, True, listed, youngest, lowest, tuple(unparseable)
            )
    return PagePlan(tuple(eligible), verdicts, False, listed, youngest, lowest, tuple(unparseable))
