"""Which shards a round lists (pure), and that no knowledge, however wrong,
widens what a round deletes (on the in-memory store)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.listing.knowledge import (
    ShardFacts,
    ShardKnowledge,
    ShardObservation,
    decode_knowledge,
    encode_knowledge,
    trust_knowledge,
)
from epochgc.gc.listing.schedule import ListingPolicy, learn, needs_discovery, plan_listing
from epochgc.gc.listing.shards import load_knowledge
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.storage.keys import encode_l0_key, gc_shard_state_key, parse_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import Controller

ROOT = "epochgc"
T0 = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
POLICY = ListingPolicy(max_lag_seconds=3600, full_sweep_interval_seconds=86400)


def facts(listed_at: datetime, safe_epoch: int, lowest: int | None) -> ShardFacts:
    return ShardFacts(listed_at=listed_at, safe_epoch=safe_epoch, lowest_epoch=lowest)


def known(shards: dict[int, ShardFacts]) -> ShardKnowledge:
    return ShardKnowledge(shards=shards, full_sweep_at=T0, discovered_at=T0)


def test_no_knowledge_lists_every_shard_in_a_full_sweep() -> None:
    plan = plan_listing(ShardKnowledge(), range(5), safe_epoch=9, now=T0, policy=POLICY)
    assert plan.shards == (0, 1, 2, 3, 4) and plan.full_sweep


def test_a_shard_is_listed_when_its_eligible_objects_have_waited_long_enough() -> None:
    knowledge = known({0: facts(T0, 10, 12), 1: facts(T0, 10, None)})
    soon = plan_listing(
        knowledge, [0, 1], safe_epoch=11, now=T0 + timedelta(minutes=5), policy=POLICY
    )
    assert soon.shards == () and not soon.full_sweep
    assert soon.next_due_at == T0 + timedelta(seconds=3600 * 0.95)
    due = plan_listing(knowledge, [0, 1], safe_epoch=11, now=soon.next_due_at, policy=POLICY)
    assert due.shards == (0, 1)


def test_a_shard_below_its_floor_is_quiet_and_its_clock_starts_later() -> None:
    knowledge = known({0: facts(T0, 10, 12)})
    later = T0 + timedelta(minutes=30)
    plan = plan_listing(knowledge, [0], safe_epoch=10, now=later, policy=POLICY)
    assert plan.shards == () and plan.quiet == (0,)
    knowledge = learn(knowledge, plan, {}, [], safe_epoch=10, now=later, present=None)
    at_old_due = T0 + timedelta(seconds=3600 * 0.95)
    assert plan_listing(knowledge, [0], safe_epoch=11, now=at_old_due, policy=POLICY).shards == ()
    assert knowledge.shards[0].eligible_from == later


def test_new_shards_and_full_sweeps_are_listed() -> None:
    knowledge = known({0: facts(T0, 10, None)})
    plan = plan_listing(knowledge, [0, 7], safe_epoch=10, now=T0, policy=POLICY)
    assert plan.shards == (7,)
    day = T0 + timedelta(days=1)
    assert plan_listing(knowledge, [0, 7], safe_epoch=10, now=day, policy=POLICY).full_sweep


def test_failed_shards_are_forgotten_and_absent_shards_known_empty() -> None:
    knowledge = known({0: facts(T0, 10, None), 1: facts(T0, 10, None), 2: facts(T0, 10, 11)})
    now = T0 + timedelta(hours=1)
    plan = plan_listing(knowledge, [0, 1], safe_epoch=11, now=now, policy=POLICY)
    seen = {0: ShardObservation(3, 3000, 12)}
    after = learn(knowledge, plan, seen, [1], safe_epoch=11, now=now, present=[0, 1])
    assert set(after.shards) == {0, 2}, "a failed shard is listed again next round"
    assert after.shards[0].lowest_epoch == 12 and after.shards[0].bytes_per_second > 0
    gone = after.shards[2]
    assert (gone.listed_at, gone.safe_epoch, gone.lowest_epoch) == (now, 11, None)
    again = plan_listing(
        after, [0, 2], safe_epoch=11, now=now + timedelta(minutes=1), policy=POLICY
    )
    assert again.shards == () and 2 in again.quiet, "refilled, it waits for M like any shard"


@given(
    st.dictionaries(
        st.integers(0, 999),
        st.builds(
            ShardFacts,
            listed_at=st.datetimes(
                min_value=datetime(2020, 1, 1),
                max_value=datetime(2030, 1, 1),
                timezones=st.just(UTC),
            ).map(lambda d: d.replace(microsecond=0)),
            safe_epoch=st.integers(0, 10**6),
            lowest_epoch=st.none() | st.integers(0, 10**6),
            bytes_per_second=st.floats(0, 1e9).map(lambda r: round(r, 3)),
            quiet_at=st.none(),
        ),
        max_size=5,
    )
)
def test_the_knowledge_document_round_trips(shards: dict[int, ShardFacts]) -> None:
    knowledge = ShardKnowledge(shards=shards, full_sweep_at=T0, discovered_at=None)
    assert decode_knowledge(encode_knowledge(knowledge)) == knowledge


# --- safety: knowledge decides listings, never deletions ---------------------

SHARDS = 6
M = 20


def bucket_with(keys: list[str]) -> MemoryStore:
    store = MemoryStore(VirtualClock(T0))
    controller = Controller(store, ROOT)
    while controller.current_epoch() < M:  # no topic: M = controller offset
        controller.tick()
    for key in keys:
        store.put(key, b"x" * 10)
    return store


def l0_keys(store: MemoryStore) -> set[str]:
    return {o.key for o in store.list_objects(f"{ROOT}/l0/")}


def run(store: MemoryStore, knowledge: ShardKnowledge | None, now: datetime) -> None:
    listing = ListingPolicy(max_lag_seconds=3600)
    collect_once(
        store,
        RequestStats(),
        ROOT,
        CollectSettings(timedelta(0), 1.0, shard_concurrency=1, listing=listing),
        knowledge=knowledge,
        now=now,
    )


epochs = st.integers(0, 2 * M)
keys = st.lists(
    st.tuples(st.integers(0, SHARDS - 1), epochs).map(
        lambda se: encode_l0_key(ROOT, se[0], se[1], str(uuid.uuid4()))
    ),
    max_size=30,
)
odd_keys = st.lists(
    st.sampled_from(
        [f"{ROOT}/l0/001/{5:017d}/x", f"{ROOT}/l0/1/{3:018d}/y", f"{ROOT}/l0/002/junk"]
    ),
    max_size=3,
    unique=True,
)
any_facts = st.dictionaries(
    st.integers(0, SHARDS - 1),
    st.builds(
        ShardFacts,
        listed_at=st.sampled_from([T0 - timedelta(days=3), T0, T0 + timedelta(hours=5)]),
        safe_epoch=epochs,
        lowest_epoch=st.none() | epochs,
        bytes_per_second=st.sampled_from([0.0, 1.0, 1e12]),
        quiet_at=st.none() | st.just(T0 + timedelta(hours=9)),
    ),
)
full_sweeps = st.none() | st.sampled_from([T0 - timedelta(days=5), T0, T0 + timedelta(hours=9)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys, odd_keys, any_facts, full_sweeps, st.sampled_from([0, 600, 7200]))
def test_whatever_the_knowledge_says_only_eligible_l0_keys_are_deleted(
    l0: list[str],
    odd: list[str],
    shards: dict[int, ShardFacts],
    full_sweep_at: datetime | None,
    after: int,
) -> None:
    store = bucket_with(l0 + odd)
    knowledge = ShardKnowledge(shards=shards, full_sweep_at=full_sweep_at, discovered_at=T0)
    before = l0_keys(store)
    run(store, knowledge, T0 + timedelta(seconds=after))
    deleted = before - l0_keys(store)
    for key in deleted:
        parsed = parse_l0_key(key, ROOT)
        assert parsed is not None and parsed.epoch <= M, key
    assert set(odd) <= l0_keys(store), "unparseable keys are never deleted"


@settings(max_examples=25, deadline=None)
@given(keys, st.binary(max_size=40) | st.sampled_from([b'{"v": 9}', b'{"v": 1, "shards": 3}']))
def test_an_unreadable_knowledge_document_means_list_everything(
    l0: list[str], garbage: bytes
) -> None:
    store = bucket_with(l0)
    store.put(gc_shard_state_key(ROOT), garbage)
    assert load_knowledge(store, ROOT) == ShardKnowledge()
    run(store, None, T0)
    left = {parse_l0_key(k, ROOT) for k in l0_keys(store)}
    assert all(p is not None and p.epoch > M for p in left), "a full sweep ran"


def test_the_full_sweep_catches_an_orphan_written_with_an_old_epoch() -> None:
    store = bucket_with([encode_l0_key(ROOT, 0, M + 5, str(uuid.uuid4()))])
    run(store, None, T0)
    knowledge = load_knowledge(store, ROOT)
    assert knowledge.shards[0].lowest_epoch == M + 5
    orphan = encode_l0_key(ROOT, 0, 3, str(uuid.uuid4()))
    store.put(orphan, b"late")
    run(store, knowledge, T0 + timedelta(minutes=1))
    assert orphan in l0_keys(store), "the shard is quiet at M: not listed"
    run(store, load_knowledge(store, ROOT), T0 + timedelta(days=1, seconds=1))
    assert orphan not in l0_keys(store), "the daily full sweep lists every shard"


# --- times from another collector's clock (issue 26, item 2) ---------------

MARGIN = 60.0
skews = st.sampled_from(
    [timedelta(days=-40), timedelta(0), timedelta(seconds=30), timedelta(days=30)]
)
skewed_facts = st.dictionaries(
    st.integers(0, SHARDS - 1),
    st.builds(
        ShardFacts,
        listed_at=skews.map(lambda d: T0 + d),
        safe_epoch=epochs,
        lowest_epoch=st.none() | epochs,
        bytes_per_second=st.sampled_from([0.0, 1.0, 1e12]),
        quiet_at=st.none() | skews.map(lambda d: T0 + d),
    ),
)
skewed_times = st.none() | skews.map(lambda d: T0 + d)


def all_times(knowledge: ShardKnowledge) -> list[datetime]:
    times = [knowledge.full_sweep_at, knowledge.discovered_at]
    for f in knowledge.shards.values():
        times += [f.listed_at, f.quiet_at]
    return [t for t in times if t is not None]


@settings(max_examples=80)
@given(skewed_facts, skewed_times, skewed_times, st.sets(st.integers(0, SHARDS - 1)))
def test_a_round_never_writes_back_a_time_from_the_future(
    shards: dict[int, ShardFacts],
    full_sweep_at: datetime | None,
    discovered_at: datetime | None,
    present: set[int],
) -> None:
    """Whatever another clock wrote, what a round at T0 learns and writes
    holds no time after T0, and a time from the future makes the work due."""
    stored = ShardKnowledge(shards, full_sweep_at, discovered_at, written_by="gc-fast")
    trusted, future = trust_knowledge(stored, T0, MARGIN)
    assert all(t <= T0 for t in all_times(trusted))
    assert {f.writer for f in future} <= {"gc-fast"}
    assert len(future) == sum(1 for t in all_times(stored) if t > T0 + timedelta(seconds=MARGIN))
    plan = plan_listing(trusted, present, safe_epoch=M, now=T0, policy=POLICY)
    if full_sweep_at is not None and full_sweep_at > T0 + timedelta(seconds=MARGIN):
        assert plan.full_sweep and set(plan.shards) == present
    if discovered_at is not None and discovered_at > T0 + timedelta(seconds=MARGIN):
        assert needs_discovery(trusted, T0, POLICY)
    for shard, f in shards.items():
        if shard in present and f.listed_at > T0 + timedelta(seconds=MARGIN):
            assert shard in plan.shards, "a shard listed 'in the future' is listed now"
    written = learn(trusted, plan, {}, (), safe_epoch=M, now=T0, present=present, writer="gc-right")
    assert all(t <= T0 for t in all_times(written))
    assert written.written_by == "gc-right"
    assert decode_knowledge(encode_knowledge(written)) == written


def test_the_poisoned_document_of_the_issue_makes_everything_due() -> None:
    """`gc collect` 30 days ahead wrote listed_at, discovered_at and
    full_sweep_at in the future: today that lists nothing for 30 days."""
    ahead = T0 + timedelta(days=30)
    poisoned = ShardKnowledge(
        {s: facts(ahead, M, M + 1) for s in range(SHARDS)}, ahead, ahead, "gc-collect@fast"
    )
    untrusted = plan_listing(poisoned, range(SHARDS), safe_epoch=M + 5, now=T0, policy=POLICY)
    assert untrusted.shards == () and not needs_discovery(poisoned, T0, POLICY)
    trusted, future = trust_knowledge(poisoned, T0, MARGIN)
    assert trusted.shards == {} and trusted.full_sweep_at is None
    assert {f.field for f in future} >= {"full_sweep_at", "discovered_at", "shards.000.listed_at"}
    plan = plan_listing(trusted, range(SHARDS), safe_epoch=M + 5, now=T0, policy=POLICY)
    assert plan.full_sweep and plan.shards == tuple(range(SHARDS))
    assert needs_discovery(trusted, T0, POLICY)


def test_a_time_within_the_margin_reads_as_now() -> None:
    soon = T0 + timedelta(seconds=30)
    trusted, future = trust_knowledge(
        ShardKnowledge({0: facts(soon, M, None)}, soon, soon), T0, MARGIN
    )
    assert future == ()
    assert trusted.shards[0].listed_at == T0 and trusted.full_sweep_at == T0
