"""Which shards a collection round lists, decided in one place. Start here.

A round (``gc.collection_round``) asks this module twice:

1. Before it sweeps, which shards to list (``choose_from_knowledge``, then
   ``choose_from_discovery`` if the first says the shards present must be
   listed first). Without a listing policy, or with ``all_shards``: every
   shard present. Otherwise the shards the cost-aware schedule picks
   (``schedule.plan_listing``) from what earlier listings left known
   (``knowledge``); the delimiter listing of the shards present runs only
   when something is due among the known shards, a full sweep is due, or
   the list of shards is stale (``schedule.needs_discovery``).
2. After it swept, what it learnt (``learn_from_listings``) and whether that
   is worth writing (``ShardChoice.is_worth_saving``).

Pure: no I/O, no clock (the round passes ``now``). The requests are the
round's, made through ``shards``: read the knowledge document (one GET, when
the caller holds no knowledge), list the shards present (one delimiter LIST,
when step 1 asks for it), write the knowledge (one PUT). The knowledge is
read through the stored-time rule (``knowledge.trust_knowledge``) before it
is handed here.

Whatever is decided here, what is deleted is still judged key by key
against ``M`` and the age rule: this module decides what is *listed*.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from epochgc.gc.listing.knowledge import ShardKnowledge, ShardObservation
from epochgc.gc.listing.schedule import (
    ListingPlan,
    ListingPolicy,
    learn,
    needs_discovery,
    plan_listing,
)
from epochgc.gc.listing.shards import ShardListing


@dataclass(frozen=True)
class ShardChoice:
    """The shards a round lists, and what it chose them from.

    Example::

        choice = choose_from_discovery(None, None, ShardListing((0, 1)), safe_epoch=7, now=now)
        choice.shards  # (0, 1): no policy, every shard present
    """

    shards: tuple[int, ...]
    knowledge: ShardKnowledge | None
    """The (trusted) knowledge the choice was made from; ``None``: none read."""
    plan: ListingPlan | None
    """The schedule's plan; ``None`` without a policy (nothing is learnt)."""
    found: ShardListing | None
    """What the delimiter listing found; ``None`` when none ran."""
    unscheduled: bool = False
    """No listing policy (a dry run): every shard present, always."""

    @property
    def present(self) -> tuple[int, ...] | None:
        """Every shard present, when a discovery ran."""
        return None if self.found is None else self.found.shards

    @property
    def foreign_prefixes(self) -> int:
        """Prefixes under ``{root}/l0/`` that are not shards (0 without a discovery)."""
        return 0 if self.found is None else len(self.found.foreign)

    @property
    def full_sweep(self) -> bool:
        """Every shard present is listed (no policy, ``all_shards``, or due)."""
        return self.plan is None or self.plan.full_sweep

    @property
    def next_listing_at(self) -> datetime | None:
        """When the schedule next finds a shard worth listing (with a policy)."""
        return None if self.plan is None else self.plan.next_due_at

    @property
    def why(self) -> str:
        """Why these shards, as the run summary names it: ``first_listing``
        (nothing known of the shards yet: every one present), ``every_shard``
        (no listing schedule: a dry run counts everything), ``full_sweep``
        (due every ``gc.full_sweep_interval_seconds``, or ``--all-shards``)
        or ``schedule`` (the cost-aware schedule's pick)."""
        if self.plan is None:
            return "every_shard" if self.unscheduled else "first_listing"
        return "full_sweep" if self.plan.full_sweep else "schedule"

    @property
    def is_worth_saving(self) -> bool:
        """Whether the knowledge learnt from this choice is worth a PUT: a
        shard was listed or the shards present were (otherwise only quiet
        marks changed, which the next round finds again)."""
        return self.plan is not None and (bool(self.plan.shards) or self.found is not None)


def choose_from_knowledge(
    policy: ListingPolicy | None,
    knowledge: ShardKnowledge | None,
    *,
    safe_epoch: int,
    now: datetime,
    all_shards: bool = False,
) -> ShardChoice | None:
    """The shards a round lists when the knowledge alone can tell: nothing
    is due among the known shards and the list of shards is fresh, so the
    round lists nothing and skips the delimiter listing.

    Returns:
        The choice, or ``None`` when the round must list the shards present
        first (no policy, no knowledge, ``all_shards``, or something due):
        then ask ``choose_from_discovery``.
    """
    if policy is None or knowledge is None or all_shards:
        return None
    plan = plan_listing(knowledge, knowledge.shards, safe_epoch=safe_epoch, now=now, policy=policy)
    if plan.shards or plan.full_sweep or needs_discovery(knowledge, now, policy):
        return None
    return ShardChoice(plan.shards, knowledge, plan, None)


def choose_from_discovery(
    policy: ListingPolicy | None,
    knowledge: ShardKnowledge | None,
    found: ShardListing,
    *,
    safe_epoch: int,
    now: datetime,
    all_shards: bool = False,
) -> ShardChoice:
    """The shards a round lists among those ``found`` present: all of them
    without a policy or knowledge, or with ``all_shards`` (a full sweep the
    knowledge learns from); otherwise those the schedule picks."""
    if policy is None or knowledge is None:
        return ShardChoice(found.shards, knowledge, None, found, unscheduled=policy is None)
    if all_shards:
        return ShardChoice(
            found.shards,
            knowledge,
            ListingPlan(found.shards, True, (), None, considered=len(found.shards)),
            found,
        )
    plan = plan_listing(knowledge, found.shards, safe_epoch=safe_epoch, now=now, policy=policy)
    return ShardChoice(plan.shards, knowledge, plan, found)


def learn_from_listings(
    choice: ShardChoice,
    observed: Mapping[int, ShardObservation],
    failed: Iterable[int],
    *,
    safe_epoch: int,
    now: datetime,
    writer: str,
) -> ShardKnowledge | None:
    """The knowledge after a round that listed ``choice`` completely (see
    ``schedule.learn``); ``None`` when there is nothing to learn into (no
    policy). A round that did not finish (guard, pause, stop) must not ask:
    its batches may not all have gone out."""
    if choice.plan is None or choice.knowledge is None:
        return None
    return learn(
        choice.knowledge,
        choice.plan,
        observed,
        failed,
        safe_epoch=safe_epoch,
        now=now,
        present=choice.present,
        writer=writer,
    )
