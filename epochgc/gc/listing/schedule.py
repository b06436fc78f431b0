"""Which shards are worth listing now, and when the next one is: the
cost-aware schedule ``plan`` asks. Pure: takes ``now``, does no I/O.

A shard is listed when any of these holds:

1. nothing is known about it (a new shard, or no readable knowledge
   document: list everything once, never skip);
2. a full sweep is due (``gc.full_sweep_interval_seconds`` since the last
   one): every shard is listed, which catches orphans written with an old
   epoch that the knowledge cannot foresee;
3. it may hold eligible objects (``M >= floor``, see ``knowledge``)
   and they have waited long enough: since ``eligible_from``, the earliest
   moment something in it may have become eligible, ``min(T*, lag_budget)``
   has passed, where ``T* = sqrt(2 L / (s r))`` is the economic interval of
   its arrival rate ``r`` (``gc.listing.cost``) and ``lag_budget`` is
   ``gc.max_lag_seconds`` less a margin for the round itself.

A shard whose floor is above ``M`` holds nothing (accepted) that is
eligible; the round notes it as quiet at ``now``, which moves its
``eligible_from`` forward. Shards due within a short window after ``now``
are listed with the due ones, so rounds group listings instead of
trickling one shard at a time.

Whatever this module decides, a round deletes only what the eligibility rule
allows key by key: skipping a shard delays its deletions, never widens them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from epochgc.gc.listing.cost import Prices, economic_interval_seconds
from epochgc.gc.listing.knowledge import (
    ShardFacts,
    ShardKnowledge,
    ShardObservation,
    mark_quiet,
    observe_listing,
)


@dataclass(frozen=True)
class ListingPolicy:
    """How a round picks shards (``[gc]`` and ``[cost]``).

    Attributes:
        max_lag_seconds: an eligible object waits at most this long for its
            shard's listing (while rounds run).
        full_sweep_interval_seconds: every shard is listed at least this
            often, whatever the knowledge says (old-epoch orphans).
        prices: the ``[cost]`` prices the economic interval uses.
        margin_fraction: the share of ``max_lag_seconds`` kept back for
            the round's own duration and the grouping window.
    """

    max_lag_seconds: float = 3600.0
    full_sweep_interval_seconds: float = 86400.0
    prices: Prices = dataclasses.field(default_factory=Prices)
    margin_fraction: float = 0.05

    def __post_init__(self) -> None:
        if self.max_lag_seconds <= 0 or self.full_sweep_interval_seconds <= 0:
            raise ValueError("max_lag_seconds and full_sweep_interval_seconds must be > 0")
        if not 0 <= self.margin_fraction < 0.5:
            raise ValueError("margin_fraction must be in 0..0.5")

    @property
    def margin(self) -> timedelta:
        return timedelta(seconds=self.max_lag_seconds * self.margin_fraction)

    @property
    def discovery_interval(self) -> timedelta:
        """How stale the list of shards present may get before a round
        with nothing due runs the delimiter listing anyway (new shards wait
        at most this long to be listed for the first time)."""
        return timedelta(seconds=self.max_lag_seconds / 4)

    def interval(self, facts: ShardFacts) -> timedelta:
        """How long eligible objects of this shard may wait: the economic
        interval, bounded by the lag budget."""
        budget = self.max_lag_seconds - self.margin.total_seconds()
        economic = economic_interval_seconds(facts.bytes_per_second, self.prices)
        return timedelta(seconds=min(economic, budget))

    def due_at(self, facts: ShardFacts) -> datetime:
        """When the shard should be listed if ``M`` is at or above its floor."""
        return facts.eligible_from + self.interval(facts)


@dataclass(frozen=True)
class ListingPlan:
    """What a round lists, and what it learnt without listing."""

    shards: tuple[int, ...]
    full_sweep: bool
    quiet: tuple[int, ...]
    """Shards seen with ``M`` below their floor at ``now``."""
    next_due_at: datetime | None
    """When the next shard (or full sweep) is due; ``None``: nothing known."""
    new: tuple[int, ...] = ()
    """Of ``shards``, those listed because nothing is known of them; the
    others are due (or all of them, in a full sweep)."""
    considered: int = 0
    """Shards the plan chose from: those neither listed nor quiet were not
    due yet."""

    @property
    def not_due(self) -> int:
        """Shards left unlisted by the schedule (known, ``M`` at or above
        their floor, their interval not over)."""
        return 0 if self.full_sweep else self.considered - len(self.shards) - len(self.quiet)


def is_full_sweep_due(knowledge: ShardKnowledge, now: datetime, policy: ListingPolicy) -> bool:
    """No full sweep yet, or the last one is older than the interval."""
    last = knowledge.full_sweep_at
    return last is None or (now - last).total_seconds() >= policy.full_sweep_interval_seconds


def plan_listing(
    knowledge: ShardKnowledge,
    present: Iterable[int],
    *,
    safe_epoch: int,
    now: datetime,
    policy: ListingPolicy,
) -> ListingPlan:
    """Pick the shards of ``present`` a round at ``now`` with ``M =
    safe_epoch`` lists (module docstring)."""
    shards = sorted(set(present))
    full_sweep_next = (
        None
        if knowledge.full_sweep_at is None
        else knowledge.full_sweep_at + timedelta(seconds=policy.full_sweep_interval_seconds)
    )
    if is_full_sweep_due(knowledge, now, policy):
        return ListingPlan(tuple(shards), True, (), full_sweep_next, considered=len(shards))
    horizon = now + policy.margin
    listed: list[int] = []
    new: list[int] = []
    quiet: list[int] = []
    next_due: datetime | None = full_sweep_next
    for shard in shards:
        facts = knowledge.shards.get(shard)
        if facts is None:
            listed.append(shard)
            new.append(shard)
            continue
        if safe_epoch < facts.floor_epoch:
            quiet.append(shard)
            due = policy.due_at(mark_quiet(facts, now))
        else:
            due = policy.due_at(facts)
            if due <= horizon:
                listed.append(shard)
                continue
        next_due = due if next_due is None else min(next_due, due)
    return ListingPlan(
        tuple(listed), False, tuple(quiet), next_due, new=tuple(new), considered=len(shards)
    )


def needs_discovery(knowledge: ShardKnowledge, now: datetime, policy: ListingPolicy) -> bool:
    """Whether a round with nothing due among the known shards must still
    run the delimiter listing (to find new shards)."""
    last = knowledge.discovered_at
    return last is None or now - last >= policy.discovery_interval


def learn(
    knowledge: ShardKnowledge,
    plan: ListingPlan,
    observed: Mapping[int, ShardObservation],
    failed: Iterable[int],
    *,
    safe_epoch: int,
    now: datetime,
    present: Iterable[int] | None,
    writer: str = "",
) -> ShardKnowledge:
    """The knowledge after a round: listed shards take their new facts; a
    shard whose listing or deletions failed is forgotten (so the next round
    lists it again); quiet shards note ``now``. With ``present`` (a
    discovery ran), a known shard that is not present is empty: that is
    what a listing at ``now`` would have found, so it takes those facts
    (a shard emptied by a round vanishes from the delimiter listing; when
    writers fill it again, it is listed when due, not as a new shard).

    ``knowledge`` must have gone through ``trust_knowledge`` at ``now``: the
    times it carries over are then never ahead of ``now``, so a round never
    writes back a time from the future. ``writer`` names this collector."""
    failed_set = set(failed)
    shards = dict(knowledge.shards)
    for shard in plan.shards:
        if shard in failed_set or shard not in observed:
            shards.pop(shard, None)
        else:
            shards[shard] = observe_listing(
                shards.get(shard), observed[shard], safe_epoch=safe_epoch, now=now
            )
    for shard in plan.quiet:
        if shard in shards:
            shards[shard] = mark_quiet(shards[shard], now)
    discovered_at = knowledge.discovered_at
    if present is not None:
        there = set(present)
        for shard, known in list(shards.items()):
            if shard not in there and shard not in failed_set:
                shards[shard] = observe_listing(
                    known, ShardObservation(), safe_epoch=safe_epoch, now=now
                )
        discovered_at = now
    return ShardKnowledge(
        shards=shards,
        full_sweep_at=now if plan.full_sweep else knowledge.full_sweep_at,
        discovered_at=discovered_at,
        written_by=writer,
    )
