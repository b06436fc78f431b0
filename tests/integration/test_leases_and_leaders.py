"""Singleton leases on the embedded S3, and partition leaders competing
through node ownership (node leases + ownership records): the partition
log's term fencing is what makes a deposed owner's late appends change
nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from epochgc.errors import FencedError, LeaseLostError, TransientStorageError
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.role_leases import LeaseManager
from epochgc.leases.timing import LeasePolicy
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.runtime import Runtime
from epochgc.storage.keys import PartitionId, lease_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.commands import Placeholders
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.state import Outcome
from epochgc.watermarks.partition.term_writer import TermWriter
from tests.support.events import lost_into
from tests.support.faults import HookedStore, TimesOutAfterApplyingStore
from tests.support.nodes import reconciler_node
from tests.support.placeholders import append_placeholders, batch

ROOT = "epochgc"
ORDERS0 = PartitionId("orders", 1, 0)  # the first controller entry: revision 1
NAME = "ticker"  # a singleton role's lease
POLICY = LeasePolicy(ttl_seconds=15, renew_interval_seconds=5, skew_margin_seconds=2)


class Clock:
    """A wall clock (``clock()``) and a monotonic one (``clock.monotonic()``)
    moving together; ``skew`` shifts only the wall clock."""

    def __init__(self, skew: timedelta = timedelta(0)) -> None:
        self.now = datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC)
        self.elapsed = 0.0
        self.skew = skew

    def __call__(self) -> datetime:
        return self.now + self.skew

    def monotonic(self) -> float:
        return self.elapsed

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.elapsed += seconds


def manager(store: S3ObjectStore, node: str, clock: Clock, **kwargs: object) -> LeaseManager:
    return LeaseManager(
        store,
        ROOT,
        node,
        policy=POLICY,
        runtime=Runtime(wall=clock, monotonic=clock.monotonic),
        **kwargs,  # type: ignore[arg-type]
    )


def test_acquire_renew_expire_and_take_over(store: S3ObjectStore) -> None:
    clock = Clock()
    lost: list[str] = []
    a = manager(store, "node-a", clock, events=lost_into(lost))
    b = manager(store, "node-b", clock)
    grant = a.try_acquire(NAME)
    assert grant is not None and grant.term == 1
    assert b.try_acquire(NAME) is None, "held by a"
    clock.advance(10)
    a.renew(NAME)  # t=10: valid until 10 + 15 - 2 = 23 on a's clock
    clock.advance(10)
    assert b.try_acquire(NAME) is None, "renewed: b starts watching the new version"
    clock.advance(3.5)  # t=23.5
    assert a.grant(NAME) is None, "a stops writing TTL - margin after it renewed"
    with pytest.raises(LeaseLostError):
        a.check(NAME)
    assert b.try_acquire(NAME) is None, "b has seen this version for 3.5 s only"
    clock.advance(11.5)  # t=35: the version b saw at t=20 is 15 s old
    taken = b.try_acquire(NAME)
    assert taken is not None and taken.term == 2, "term grows on a change of holder"
    with pytest.raises(LeaseLostError):
        a.renew(NAME)  # a's own grant ran out: reported lost
    assert lost == [NAME]
    # Were a to believe in its grant still (frozen between its check and
    # its write), the CAS tells it the truth.
    a._grants[NAME] = dataclasses.replace(grant, valid_until=clock.monotonic() + 3600)
    with pytest.raises(LeaseLostError):
        a.renew(NAME)
    assert lost == [NAME, NAME]
    assert a.stats["lost"] == 2


def test_a_renewal_that_landed_unanswered_does_not_lose_the_lease(store: S3ObjectStore) -> None:
    clock = Clock()
    lossy = TimesOutAfterApplyingStore(store)
    a = manager(lossy, "node-a", clock)  # type: ignore[arg-type]
    assert a.try_acquire(NAME) is not None
    clock.advance(5)
    lossy.armed = True
    with pytest.raises(TransientStorageError):
        a.renew(NAME)
    clock.advance(5)
    grant = a.renew(NAME)  # the object holds our unanswered renewal: still ours
    assert grant.term == 1
    assert grant.etag == store.get(lease_key(ROOT, NAME)).etag
    assert a.grant(NAME) is not None


def test_graceful_release_gives_immediate_failover(store: S3ObjectStore) -> None:
    clock = Clock()
    a, b = manager(store, "node-a", clock), manager(store, "node-b", clock)
    assert a.try_acquire(NAME) is not None
    a.release(NAME)
    grant = b.try_acquire(NAME)
    assert grant is not None and grant.term == 2
    assert a.held() == []


def test_a_dead_holder_with_a_clock_minutes_ahead_is_replaced_after_one_ttl(
    store: S3ObjectStore,
) -> None:
    """Its ``expires_at`` says two minutes from now; b does not care: the
    version has not changed for a TTL on b's own clock."""
    ahead, clock = Clock(skew=timedelta(minutes=2)), Clock()
    a, b = manager(store, "node-a", ahead), manager(store, "node-b", clock)
    assert a.try_acquire(NAME) is not None  # then a dies: no more renewals
    assert b.try_acquire(NAME) is None
    clock.advance(POLICY.ttl_seconds - 1)
    assert b.try_acquire(NAME) is None
    clock.advance(1)
    taken = b.try_acquire(NAME)
    assert taken is not None and taken.term == 2


def test_a_live_holder_with_a_clock_minutes_behind_keeps_its_lease(
    store: S3ObjectStore,
) -> None:
    """Its ``expires_at`` is always in b's past; renewals alone count."""
    behind, clock = Clock(skew=-timedelta(minutes=2)), Clock()
    a, b = manager(store, "node-a", behind), manager(store, "node-b", clock)
    assert a.try_acquire(NAME) is not None
    for _ in range(6):
        assert b.try_acquire(NAME) is None, "a renews: never taken from it"
        for c in (behind, clock):
            c.advance(POLICY.renew_interval_seconds)
        a.renew(NAME)
    assert a.grant(NAME) is not None


def test_a_renewal_racing_a_release_never_resurrects_the_lease(store: S3ObjectStore) -> None:
    """The heartbeat renews while the owner releases: whichever runs first,
    the lease ends released and free for b at once."""
    clock = Clock()
    a, b = manager(store, "node-a", clock), manager(store, "node-b", clock)
    assert a.try_acquire(NAME) is not None
    renewing = threading.Event()
    may_finish = threading.Event()
    real_put = store.put_if_match

    def slow_renewal(key: str, body: bytes, etag: str) -> str:
        new_etag = real_put(key, body, etag)
        if b'"released"' not in body:  # the renewal landed; its answer is slow
            renewing.set()
            may_finish.wait(5)
        return new_etag

    store.put_if_match = slow_renewal  # type: ignore[method-assign]
    heartbeat = threading.Thread(target=a.renew_all)
    heartbeat.start()
    assert renewing.wait(5)
    releaser = threading.Thread(target=a.release, args=(NAME,))
    releaser.start()
    releaser.join(0.3)
    may_finish.set()
    heartbeat.join(5)
    releaser.join(5)
    store.put_if_match = real_put  # type: ignore[method-assign]
    assert a.held() == []
    taken = b.try_acquire(NAME)
    assert taken is not None and taken.term == 2


def test_heartbeat_keeps_leases_alive_and_stop_releases(store: S3ObjectStore) -> None:
    policy = LeasePolicy(ttl_seconds=1.5, renew_interval_seconds=0.2, skew_margin_seconds=0.2)
    a = LeaseManager(store, ROOT, "node-a", policy=policy)
    b = LeaseManager(store, ROOT, "node-b", policy=policy)
    assert a.try_acquire(NAME) is not None
    a.start()
    try:
        time.sleep(2.0)  # longer than the TTL: only renewals keep it
        assert a.grant(NAME) is not None
        assert b.try_acquire(NAME) is None
    finally:
        a.stop()
    assert b.try_acquire(NAME) is not None, "stop() released: no TTL wait"


class Owner:
    """A node's ownership of the partitions (node lease + ownership
    records) on the test's clock, driven round by round."""

    def __init__(self, store: object, node: str, clock: Clock) -> None:
        self.lease = NodeLease(
            store,  # type: ignore[arg-type]
            ROOT,
            node,
            policy=POLICY,
            runtime=Runtime(wall=clock, monotonic=clock.monotonic),
        )
        assert self.lease.try_acquire()
        self.ownership = NodeOwnership(
            store,  # type: ignore[arg-type]
            ROOT,
            self.lease,
            max_moves_per_round=10,
            runtime=Runtime(wall=clock, monotonic=clock.monotonic),
        )

    def round(self) -> bool:
        """Renew if due, run an ownership round; whether it owns ORDERS0."""
        self.lease.renew_if_due()
        self.ownership.run_round([ORDERS0])
        return ORDERS0 in self.ownership.owned()

    def check(self, term: int) -> None:
        if self.ownership.term(ORDERS0) != term:
            raise LeaseLostError(f"{ORDERS0} not owned at term {term}")


def _leader(store: object, owner: Owner, depth: int = 8) -> TermWriter:
    """A leader at the ownership record's term, raised above the log's
    highest term the way the reconciler node does it."""
    replica = PartitionReplica(store, ROOT, ORDERS0)  # type: ignore[arg-type]
    replica.open()
    term = owner.ownership.term(ORDERS0)
    if term is None:
        raise LeaseLostError(f"{ORDERS0} is not owned")
    if replica.state.term >= term:
        raised = owner.ownership.raise_term(ORDERS0, replica.state.term)
        assert raised is not None
        term = raised
    return TermWriter(replica, term, check_lease=lambda: owner.check(term), depth=depth)


def two_owners(store: S3ObjectStore) -> tuple[Clock, Owner, Owner]:
    """A topic "orders" with one partition owned by a; b watches."""
    Controller(store, ROOT).create_topic("orders", 1)
    clock = Clock()
    a = Owner(store, "node-a", clock)
    assert a.round()
    b = Owner(store, "node-b", clock)
    assert not b.round(), "owned by a, which is live"
    return clock, a, b


def fail_over(clock: Clock, b: Owner) -> None:
    """a is silent (no renewals) for more than a TTL; b keeps renewing and
    takes the partition over."""
    for _ in range(4):
        clock.advance(POLICY.renew_interval_seconds)
        b.lease.renew_if_due()
    assert b.round()


def test_the_owner_loser_cannot_append(store: S3ObjectStore) -> None:
    _clock, a, b = two_owners(store)
    leader_a = _leader(store, a)
    leader_a.start()
    append_placeholders(leader_a, 1, batch(1))
    with pytest.raises(LeaseLostError):
        _leader(store, b)


def test_failover_after_expiry_fences_the_old_leader(store: S3ObjectStore) -> None:
    clock, a, b = two_owners(store)
    old = _leader(store, a)
    old.start()
    append_placeholders(old, 1, batch(1))
    fail_over(clock, b)  # a crashed (no renewals): unchanged for a TTL
    new = _leader(store, b)
    window = new.start()
    assert new.term == 2 and window.max == 1
    before = PartitionReplica(store, ROOT, ORDERS0)
    before.open()
    # The old leader wakes up and, skipping its ownership check, keeps appending.
    old._check_lease = lambda: None
    with pytest.raises(FencedError):
        append_placeholders(old, 1, batch(2))
    after = PartitionReplica(store, ROOT, ORDERS0)
    after.open()
    assert after.state.next_offset == before.state.next_offset == 1
    assert after.state.term == 2
    append_placeholders(new, 1, batch(3))
    assert PartitionReplica(store, ROOT, ORDERS0).open().next_offset == 2


def test_stale_leaders_pipelined_appends_after_new_term_start_change_nothing(
    store: S3ObjectStore,
) -> None:
    """A new owner's term_start lands in the middle of the old owner's
    pipeline of 8: nothing the old leader wrote after it counts."""
    clock, a, b = two_owners(store)
    old = _leader(store, a)
    old.start()  # term_start at offset 0
    takeover_done: list[int] = []

    def new_leader_takes_over(key: str, _body: bytes) -> None:
        if key.endswith(f"{4:020d}") and not takeover_done:
            fail_over(clock, b)
            new = _leader(store, b)
            new.start()
            takeover_done.append(new.replica.state.applied_log_offset)

    hooked = HookedStore(store, before_create=new_leader_takes_over)
    old.replica._log._store = hooked  # the old leader's view of the bucket
    old._check_lease = lambda: None
    commands = [Placeholders(0, 0, 1, batch(i)) for i in range(8)]
    with pytest.raises(FencedError):
        old.append_all(commands)
    assert takeover_done
    final = PartitionReplica(store, ROOT, ORDERS0)
    final.open()
    assert final.state.term == 2
    # Only the old leader's entries before the new term_start count; those
    # that landed after it are in the log but change nothing.
    entries = final.log.read(0).entries
    new_term_at = next(
        e.offset
        for e in entries
        if b'"type":"term_start"' in e.payload and b'"term":2' in e.payload
    )
    before = [e for e in entries[:new_term_at] if b"placeholders" in e.payload]
    after = [e for e in entries[new_term_at:] if b'"term":1' in e.payload]
    assert after, "some of the old leader's pipelined appends landed after the takeover"
    assert final.state.next_offset == len(before)


def test_a_leader_whose_append_failed_must_restart_its_term(store: S3ObjectStore) -> None:
    _clock, a, _b = two_owners(store)
    leader = _leader(store, a)
    leader.start()

    def fail(_key: str, _body: bytes) -> None:
        raise TransientStorageError("injected outage")

    leader.replica._log._store = HookedStore(store, before_create=fail)
    with pytest.raises(TransientStorageError, match="injected outage"):
        append_placeholders(leader, 1, batch(1))
    leader.replica._log._store = store
    with pytest.raises(FencedError, match="start a new term"):
        append_placeholders(leader, 1, batch(2))
    fresh = _leader(store, a)  # the log holds term 1: the record moves to 2
    assert fresh.term == 2 and a.ownership.term(ORDERS0) == 2
    fresh.start()
    entry = append_placeholders(fresh, 1, batch(3))
    assert entry.result.outcome is Outcome.APPLIED
    assert fresh.replica.state.next_offset == 1


def test_upgrade_a_node_leads_above_the_old_partition_lease_and_fences_its_holder(
    store: S3ObjectStore,
) -> None:
    """A bucket from the per-partition lease design: an old leader holds
    ``partition.orders.1.0`` at term 7 and has written at term 7. A node of
    this version leads at term 8 and the old leader's late appends are
    fenced; the old lease object is left as it was (ignored)."""
    Controller(store, ROOT).create_topic("orders", 1)
    legacy = lease_key(ROOT, "partition.orders.1.0")
    old_lease = b'{"v":1,"holder":"old/1","term":7,"expires_at":"2026-11-22T03:00:15.000Z"}'
    store.put(legacy, old_lease)
    replica = PartitionReplica(store, ROOT, ORDERS0)
    replica.open()
    old = TermWriter(replica, 7)
    old.start()
    append_placeholders(old, 1, batch(1))

    async def scenario() -> None:
        node, _ownership = reconciler_node(
            store, ROOT, "node-new", LeaderDirectory(), policy=POLICY
        )
        await node.run_round()
        (service,) = node.led_services()
        assert service.term == 8
        with pytest.raises(FencedError):
            append_placeholders(old, 1, batch(2))
        await node.stop()

    asyncio.run(scenario())
    assert store.get(legacy).body == old_lease
    assert PartitionReplica(store, ROOT, ORDERS0).open().next_offset == 1
