"""Leases on the embedded S3, and partition leaders competing through them."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta

import pytest

from epochgc.errors import FencedError, LeaseLostError, TransientStorageError
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.commands import PlaceholderBatch, Placeholders
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.leases import LeaseManager, LeasePolicy
from epochgc.watermarks.replica import PartitionLeader, PartitionReplica
from epochgc.watermarks.state import Outcome
from tests.support.faults import HookedStore

ROOT = "epochgc"
NAME = "partition.orders.0"
POLICY = LeasePolicy(ttl_seconds=15, renew_interval_seconds=5, skew_margin_seconds=2)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def two_nodes(store: S3ObjectStore) -> tuple[Clock, LeaseManager, LeaseManager]:
    """A topic "orders" with one partition, and two nodes sharing a clock."""
    Controller(store, ROOT).create_topic("orders", 1)
    clock = Clock()
    a = LeaseManager(store, ROOT, "node-a", policy=POLICY, now=clock)
    b = LeaseManager(store, ROOT, "node-b", policy=POLICY, now=clock)
    return clock, a, b


def batch(i: int) -> tuple[PlaceholderBatch, ...]:
    return (PlaceholderBatch(f"l0/{i}", 0, 10, 1),)


def test_acquire_renew_expire_and_take_over(store: S3ObjectStore) -> None:
    clock = Clock()
    lost: list[str] = []
    a = LeaseManager(store, ROOT, "node-a", policy=POLICY, now=clock, on_lost=lost.append)
    b = LeaseManager(store, ROOT, "node-b", policy=POLICY, now=clock)
    grant = a.try_acquire(NAME)
    assert grant is not None and grant.term == 1
    assert b.try_acquire(NAME) is None, "held by a"
    clock.advance(10)
    a.renew(NAME)
    clock.advance(10)
    assert b.try_acquire(NAME) is None, "renewed: still a's"
    clock.advance(3.5)  # 1.5 s before expiry
    assert a.grant(NAME) is None, "a stops writing before expiry (skew margin)"
    with pytest.raises(LeaseLostError):
        a.check(NAME)
    assert b.try_acquire(NAME) is None, "not yet expired for b"
    clock.advance(2)
    taken = b.try_acquire(NAME)
    assert taken is not None and taken.term == 2, "term grows on a change of holder"
    with pytest.raises(LeaseLostError):
        a.renew(NAME)  # a's own grant ran out: reported lost
    assert lost == [NAME]
    # With a clock running slow, a still believes in its grant: the CAS
    # tells it the truth.
    a._grants[NAME] = dataclasses.replace(grant, expires_at=clock.now + timedelta(hours=1))
    with pytest.raises(LeaseLostError):
        a.renew(NAME)
    assert lost == [NAME, NAME]
    assert a.stats["lost"] == 2


def test_graceful_release_gives_immediate_failover(store: S3ObjectStore) -> None:
    clock = Clock()
    a = LeaseManager(store, ROOT, "node-a", policy=POLICY, now=clock)
    b = LeaseManager(store, ROOT, "node-b", policy=POLICY, now=clock)
    assert a.try_acquire(NAME) is not None
    a.release(NAME)
    grant = b.try_acquire(NAME)
    assert grant is not None and grant.term == 2
    assert a.held() == []


def test_bump_term_keeps_the_holder(store: S3ObjectStore) -> None:
    clock = Clock()
    a = LeaseManager(store, ROOT, "node-a", policy=POLICY, now=clock)
    first = a.try_acquire(NAME)
    assert first is not None
    bumped = a.bump_term(NAME)
    assert (bumped.term, bumped.holder) == (first.term + 1, first.holder)


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


def _leader(
    store: object, leases: LeaseManager, name: str = NAME, depth: int = 8
) -> PartitionLeader:
    replica = PartitionReplica(store, ROOT, "orders", 0)  # type: ignore[arg-type]
    replica.open()
    term = leases.check(name).term
    return PartitionLeader(replica, term, check_lease=lambda: leases.check(name), depth=depth)


def test_the_lease_loser_cannot_append(store: S3ObjectStore) -> None:
    _clock, a, b = two_nodes(store)
    a.try_acquire(NAME)
    leader_a = _leader(store, a)
    leader_a.start()
    leader_a.append_placeholders(1, batch(1))
    assert b.try_acquire(NAME) is None
    with pytest.raises(LeaseLostError):
        _leader(store, b)


def test_failover_after_expiry_fences_the_old_leader(store: S3ObjectStore) -> None:
    clock, a, b = two_nodes(store)
    a.try_acquire(NAME)
    old = _leader(store, a)
    old.start()
    old.append_placeholders(1, batch(1))
    clock.advance(16)  # a crashed (no renewals); its lease expires
    assert b.try_acquire(NAME) is not None
    new = _leader(store, b)
    window = new.start()
    assert new.term == 2 and window.max == 1
    before = PartitionReplica(store, ROOT, "orders", 0)
    before.open()
    # The old leader wakes up and, skipping its lease check, keeps appending.
    old._check_lease = lambda: None
    with pytest.raises(FencedError):
        old.append_placeholders(1, batch(2))
    after = PartitionReplica(store, ROOT, "orders", 0)
    after.open()
    assert after.state.next_offset == before.state.next_offset == 1
    assert after.state.term == 2
    new.append_placeholders(1, batch(3))
    assert PartitionReplica(store, ROOT, "orders", 0).open().next_offset == 2


def test_stale_leaders_pipelined_appends_after_new_term_start_change_nothing(
    store: S3ObjectStore,
) -> None:
    """A new leader's term_start lands in the middle of the old leader's
    pipeline of 8: nothing the old leader wrote after it counts."""
    clock, a, b = two_nodes(store)
    a.try_acquire(NAME)
    old = _leader(store, a)
    old.start()  # term_start at offset 0
    takeover_done: list[int] = []

    def new_leader_takes_over(key: str, _body: bytes) -> None:
        if key.endswith(f"{4:020d}") and not takeover_done:
            clock.advance(16)
            b.try_acquire(NAME)
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
    final = PartitionReplica(store, ROOT, "orders", 0)
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
    _clock, a, _b = two_nodes(store)
    a.try_acquire(NAME)
    leader = _leader(store, a)
    leader.start()

    def fail(_key: str, _body: bytes) -> None:
        raise TransientStorageError("injected outage")

    leader.replica._log._store = HookedStore(store, before_create=fail)
    with pytest.raises(TransientStorageError, match="injected outage"):
        leader.append_placeholders(1, batch(1))
    leader.replica._log._store = store
    with pytest.raises(FencedError, match="start a new term"):
        leader.append_placeholders(1, batch(2))
    a.bump_term(NAME)
    fresh = _leader(store, a)
    fresh.start()
    entry = fresh.append_placeholders(1, batch(3))
    assert entry.result.outcome is Outcome.APPLIED
    assert fresh.replica.state.next_offset == 1
