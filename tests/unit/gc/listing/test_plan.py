"""Which shards a round lists, as one decision (pure): when the knowledge
alone can choose, when the shards present must be listed first, what a
round learns and when that is worth a PUT."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.listing.knowledge import ShardFacts, ShardKnowledge, ShardObservation
from epochgc.gc.listing.plan import (
    ShardChoice,
    choose_from_discovery,
    choose_from_knowledge,
    learn_from_listings,
)
from epochgc.gc.listing.schedule import ListingPolicy
from epochgc.gc.listing.shards import ShardListing

T0 = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
POLICY = ListingPolicy(max_lag_seconds=3600, full_sweep_interval_seconds=86400)
M = 10


def known(shards: dict[int, ShardFacts], discovered_at: datetime = T0) -> ShardKnowledge:
    return ShardKnowledge(shards=shards, full_sweep_at=T0, discovered_at=discovered_at)


QUIET = known({0: ShardFacts(T0, M, M + 2), 1: ShardFacts(T0, M, None)})
"""Nothing in either shard can be eligible while ``M`` stays at 10."""


def choose(
    policy: ListingPolicy | None,
    knowledge: ShardKnowledge | None,
    found: ShardListing,
    now: datetime,
    *,
    all_shards: bool = False,
) -> tuple[ShardChoice, bool]:
    """The choice as a round makes it, and whether it listed the shards present."""
    choice = choose_from_knowledge(policy, knowledge, safe_epoch=M, now=now, all_shards=all_shards)
    if choice is not None:
        return choice, False
    return choose_from_discovery(
        policy, knowledge, found, safe_epoch=M, now=now, all_shards=all_shards
    ), True


def test_without_a_policy_or_knowledge_every_shard_present_is_listed() -> None:
    found = ShardListing((0, 3), ("epochgc/l0/ab/",))
    for policy, knowledge in [(None, QUIET), (POLICY, None), (None, None)]:
        choice, discovered = choose(policy, knowledge, found, T0)
        assert discovered and choice.shards == (0, 3)
        assert choice.plan is None and choice.full_sweep and choice.next_listing_at is None
        assert choice.present == (0, 3) and choice.foreign_prefixes == 1
        assert not choice.is_worth_saving, "no policy: nothing is learnt or written"


def test_nothing_due_and_a_fresh_shard_list_skip_the_delimiter_listing() -> None:
    choice, discovered = choose(POLICY, QUIET, ShardListing((0, 1, 2)), T0 + timedelta(minutes=1))
    assert not discovered and choice.shards == ()
    assert choice.present is None and choice.foreign_prefixes == 0
    assert choice.plan is not None and choice.plan.quiet == (0, 1)
    assert choice.next_listing_at is not None and not choice.full_sweep
    assert not choice.is_worth_saving, "only quiet marks changed: no PUT"


def test_a_stale_shard_list_is_listed_again_to_find_new_shards() -> None:
    later = T0 + POLICY.discovery_interval
    choice, discovered = choose(POLICY, QUIET, ShardListing((0, 1, 2)), later)
    assert discovered and choice.shards == (2,), "the new shard, never the quiet ones"
    assert choice.present == (0, 1, 2) and choice.is_worth_saving


def test_a_due_shard_means_the_shards_present_are_listed_and_planned_again() -> None:
    knowledge = known({0: ShardFacts(T0, M - 5, M - 3), 1: ShardFacts(T0, M, None)})
    choice, discovered = choose(POLICY, knowledge, ShardListing((0, 1, 5)), T0 + timedelta(hours=1))
    assert discovered and choice.shards == (0, 5)
    assert choice.knowledge is knowledge and choice.is_worth_saving


def test_all_shards_lists_every_shard_present_as_a_full_sweep() -> None:
    choice, discovered = choose(POLICY, QUIET, ShardListing((0, 1, 2)), T0, all_shards=True)
    assert discovered and choice.shards == (0, 1, 2) and choice.full_sweep
    assert choice.plan is not None and choice.plan.full_sweep and choice.is_worth_saving


def test_a_full_sweep_due_lists_every_shard_present() -> None:
    day = T0 + timedelta(seconds=POLICY.full_sweep_interval_seconds)
    choice, discovered = choose(POLICY, QUIET, ShardListing((0, 1, 2)), day)
    assert discovered and choice.shards == (0, 1, 2) and choice.full_sweep


def test_learning_takes_the_listings_the_quiet_shards_and_the_shards_present() -> None:
    now = T0 + POLICY.discovery_interval
    choice, _ = choose(POLICY, QUIET, ShardListing((0, 1, 2)), now)
    seen = {2: ShardObservation(eligible=1, eligible_bytes=10, lowest_kept_epoch=M + 1)}
    learnt = learn_from_listings(choice, seen, [], safe_epoch=M, now=now, writer="w")
    assert learnt is not None and learnt.written_by == "w" and learnt.discovered_at == now
    assert learnt.shards[2] == ShardFacts(now, M, M + 1)
    assert learnt.shards[0].quiet_at == learnt.shards[1].quiet_at == now


def test_a_failed_shard_is_forgotten() -> None:
    choice, _ = choose(POLICY, None, ShardListing((0,)), T0)
    assert learn_from_listings(choice, {}, [0], safe_epoch=M, now=T0, writer="") is None
    choice, _ = choose(POLICY, ShardKnowledge(), ShardListing((0, 1)), T0)
    seen = {0: ShardObservation(), 1: ShardObservation()}
    learnt = learn_from_listings(choice, seen, [1], safe_epoch=M, now=T0, writer="")
    assert learnt is not None and set(learnt.shards) == {0} and learnt.full_sweep_at == T0


@given(
    st.sets(st.integers(0, 20)),
    st.dictionaries(
        st.integers(0, 20),
        st.builds(
            ShardFacts,
            listed_at=st.sampled_from([T0 - timedelta(days=2), T0 - timedelta(hours=1), T0]),
            safe_epoch=st.integers(0, 2 * M),
            lowest_epoch=st.none() | st.integers(0, 2 * M),
        ),
    ),
    st.none() | st.sampled_from([T0 - timedelta(days=2), T0]),
    st.booleans(),
)
def test_a_round_lists_only_shards_present_and_skips_the_listing_only_with_nothing_to_list(
    present: set[int],
    shards: dict[int, ShardFacts],
    discovered_at: datetime | None,
    all_shards: bool,
) -> None:
    knowledge = known(shards, discovered_at) if discovered_at else ShardKnowledge(shards=shards)
    found = ShardListing(tuple(sorted(present)))
    choice, discovered = choose(POLICY, knowledge, found, T0, all_shards=all_shards)
    if discovered:
        assert set(choice.shards) <= present
        assert choice.shards == tuple(sorted(choice.shards))
        assert set(present) - set(shards) <= set(choice.shards), "a new shard is always listed"
    else:
        assert choice.shards == () and not all_shards


def test_a_choice_says_why_those_shards_and_what_the_schedule_left_out() -> None:
    # A dry run (no policy), the first round (no knowledge), a full sweep
    # and the schedule's pick each name themselves; the schedule's counts
    # add up to the shards present.
    found = ShardListing((0, 1, 5, 7))
    assert choose(None, QUIET, found, T0)[0].why == "every_shard"
    assert choose(POLICY, None, found, T0)[0].why == "first_listing"
    assert choose(POLICY, QUIET, found, T0, all_shards=True)[0].why == "full_sweep"
    knowledge = known(
        {
            0: ShardFacts(T0, M - 5, M - 3),  # due an hour later
            1: ShardFacts(T0, M, None),  # quiet: M below its floor
            7: ShardFacts(T0 + timedelta(minutes=59), M - 5, M - 3),  # not due yet
        }
    )
    choice, _ = choose(POLICY, knowledge, found, T0 + timedelta(hours=1))
    plan = choice.plan
    assert choice.why == "schedule" and plan is not None
    assert choice.shards == (0, 5) and plan.new == (5,)
    assert (plan.quiet, plan.not_due) == ((1,), 1)
