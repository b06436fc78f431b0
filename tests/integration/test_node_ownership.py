"""Node leases and ownership rounds, on the in-memory CAS store (exact
request counts) and on the embedded S3 (the real conditional writes), with a
virtual clock: nothing sleeps."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta

import pytest

from epochgc.errors import NotFoundError, PreconditionFailedError, TransientStorageError
from epochgc.leases.holder_codec import decode_node_lease, decode_owner
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.timing import STAMP_RESOLUTION_SECONDS, LeasePolicy
from epochgc.ownership.assignment import AssignmentCache, OwnerRecord, desired_assignment
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.ownership.owner_records import OwnershipStore
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.storage.keys import PartitionId, node_lease_key, nodes_prefix, owner_key
from epochgc.storage.object_store import ObjectInfo, ObjectStore
from epochgc.storage.s3 import S3ObjectStore
from tests.support.faults import HookedStore, StallingStore, TimesOutAfterApplyingStore
from tests.support.wrapping import StoreWrapper

ROOT = "epochgc"
POLICY = LeasePolicy(ttl_seconds=15.0, renew_interval_seconds=5.0, skew_margin_seconds=2.0)
ROUND = 5.0
RELIST = 60.0
"""``NodeOwnership``'s default ``relist_records_seconds``."""


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture(params=["memory", "s3"])
def any_store(request: pytest.FixtureRequest, clock: VirtualClock) -> Iterator[ObjectStore]:
    if request.param == "memory":
        yield MemoryStore(clock)
    else:
        yield request.getfixturevalue("store")


def make_lease(store: ObjectStore, clock: VirtualClock, node: str) -> NodeLease:
    return NodeLease(store, ROOT, node, policy=POLICY, runtime=clock.runtime())


class Cluster:
    """Nodes driven round by round on one virtual clock."""

    def __init__(
        self,
        store: ObjectStore,
        clock: VirtualClock,
        partitions: list[PartitionId],
        max_moves: int = 64,
        *,
        store_timestamps: bool = True,
    ) -> None:
        self.max_moves = max_moves
        self.store_timestamps = store_timestamps
        self.store = store
        self.clock = clock
        self.partitions = partitions
        self.nodes: dict[str, NodeOwnership] = {}
        self.killed: set[str] = set()
        self.cache = AssignmentCache()

    def add(self, node: str) -> NodeOwnership:
        lease = make_lease(self.store, self.clock, node)
        assert lease.try_acquire()
        self.nodes[node] = NodeOwnership(
            self.store,
            ROOT,
            lease,
            max_moves_per_round=self.max_moves,
            runtime=self.clock.runtime(),
            assignments=self.cache,
            # The embedded S3 stamps objects from the real clock, which a
            # virtual clock's rounds do not move: its stamps say nothing of
            # the virtual time between two writes.
            use_store_timestamps=self.store_timestamps
            and not isinstance(self.store, S3ObjectStore),
        )
        return self.nodes[node]

    def round(self) -> None:
        for name, node in sorted(self.nodes.items()):
            if name in self.killed:
                continue
            node._lease.renew_if_due()
            node.run_round(self.partitions)
            self.assert_single_owners()
        self.clock.advance(ROUND)

    def assert_single_owners(self) -> None:
        seen: dict[PartitionId, str] = {}
        for name, node in self.nodes.items():
            for pid in node.owned():
                assert pid not in seen, f"{pid} owned by {seen[pid]} and {name}"
                seen[pid] = name

    def owners(self) -> dict[PartitionId, str]:
        return {p: n for n, node in self.nodes.items() for p in node.owned()}


def pids(count: int) -> list[PartitionId]:
    return [PartitionId("orders", 3, p) for p in range(count)]


def test_a_node_lease_holds_one_incarnation_and_changes_hands_only_after_a_ttl(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    first = make_lease(any_store, clock, "node-a")
    assert first.try_acquire()
    doc = decode_node_lease(any_store.get(node_lease_key(ROOT, "node-a")).body, "lease")
    assert (doc.node, doc.incarnation, doc.released) == ("node-a", first.incarnation, False)

    restarted = make_lease(any_store, clock, "node-a")  # same id, new process
    assert not restarted.try_acquire()
    clock.advance(14.0)
    assert not restarted.try_acquire()  # first is silent, but not for a TTL yet
    clock.advance(1.0)
    assert not first.is_valid()  # its grant ran out on its own clock first
    assert restarted.try_acquire()
    assert restarted.incarnation != first.incarnation
    first.renew_if_due()  # the old one finds out
    assert not first.is_valid()


def test_renewals_cost_one_request_per_interval_whatever_the_calls(clock: VirtualClock) -> None:
    store = MemoryStore(clock)
    lease = make_lease(store, clock, "node-a")
    assert lease.try_acquire()
    store.reset_counts()
    for _ in range(60):  # 60 s, a heartbeat check every second
        clock.advance(1.0)
        lease.renew_if_due()
        assert lease.is_valid()
    assert store.count("PutObject", f"{ROOT}/meta/nodes/") == 12
    assert store.count() == 12


def test_a_released_node_lease_is_taken_at_once(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    first = make_lease(any_store, clock, "node-a")
    assert first.try_acquire()
    first.release()
    assert not first.is_valid()
    assert decode_node_lease(any_store.get(first.key).body, "lease").released
    clock.advance(POLICY.renew_interval_seconds)
    assert not first.renew_if_due()  # a late heartbeat does not undo the release
    assert decode_node_lease(any_store.get(first.key).body, "lease").released
    second = make_lease(any_store, clock, "node-a")
    assert second.try_acquire()


def test_nodes_balance_fail_over_after_a_ttl_and_take_a_clean_stop_at_once(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    cluster = Cluster(any_store, clock, pids(30))
    for name in ("a", "b", "c"):
        cluster.add(name)
    cluster.round()
    owners = cluster.owners()
    assert len(owners) == 30
    assert sorted(list(owners.values()).count(n) for n in "abc") == [10, 10, 10]

    # kill -9 of b: it stops renewing; its partitions go after a TTL
    victims = {p for p, n in owners.items() if n == "b"}
    cluster.killed.add("b")
    rounds = 0
    while not victims <= set(cluster.owners()) - cluster.nodes["b"].owned():
        cluster.round()
        rounds += 1
        assert rounds <= 6
    assert rounds * ROUND <= POLICY.ttl_seconds + 2 * ROUND
    for pid in victims:
        record = decode_owner(any_store.get(owner_key(ROOT, pid)).body, "owner")
        assert record.node in "ac" and record.term == 2  # taken over with term + 1
    assert sorted(list(cluster.owners().values()).count(n) for n in "ac") == [15, 15]

    # the survivors kept what they had all along: the ETags they got back
    # from their writes are the ones the listings show
    assert cluster.nodes["a"].totals["lost"] == cluster.nodes["c"].totals["lost"] == 0

    # a clean stop of c: a takes everything at its next round, no TTL wait
    cluster.nodes["c"].stop()
    cluster.killed.add("c")
    cluster.round()
    assert set(cluster.owners().values()) == {"a"} and len(cluster.owners()) == 30


def test_a_joining_node_gets_its_share_by_hand_back(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    cluster = Cluster(any_store, clock, pids(30))
    cluster.add("a")
    cluster.add("b")
    cluster.round()
    cluster.add("c")
    for _ in range(3):
        cluster.round()
    assert cluster.owners() == desired_assignment(["a", "b", "c"], pids(30))
    handed = cluster.nodes["a"].totals["handed_back"] + cluster.nodes["b"].totals["handed_back"]
    before = desired_assignment(["a", "b"], pids(30))
    after = desired_assignment(["a", "b", "c"], pids(30))
    assert handed == sum(1 for p in before if before[p] != after[p])  # every move, no more


def test_an_unreadable_record_is_never_overwritten(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    key = owner_key(ROOT, PartitionId("orders", 3, 0))
    future = json.dumps({"v": 99, "node": "x"}).encode()
    any_store.put(key, future)
    cluster = Cluster(any_store, clock, pids(1))
    cluster.add("a")
    for _ in range(2):
        cluster.round()
    assert any_store.get(key).body == future
    assert cluster.owners() == {}


def _settled_node(store: ObjectStore, clock: VirtualClock) -> NodeOwnership:
    """Node ``a``, alone over two partitions, after a round with nothing to move."""
    cluster = Cluster(store, clock, pids(2))
    node = cluster.add("a")
    cluster.round()
    cluster.round()  # a round with nothing to move: settled
    return node


def _rewrite_owner(store: ObjectStore, node: str, incarnation: str) -> PartitionId:
    """Rewrite orders/1's owner record behind the owner's back: ``node``'s
    ``incarnation`` owns it in term 9."""
    pid = PartitionId("orders", 3, 1)
    record = (
        f'{{"v":1,"node":"{node}","incarnation":"{incarnation}","term":9,'
        '"updated_at":"2026-11-24T05:00:00Z"}'
    )
    store.put(owner_key(ROOT, pid), record.encode())
    return pid


def test_a_record_taken_from_under_us_is_dropped(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    node = _settled_node(any_store, clock)
    assert len(node.owned()) == 2
    pid = _rewrite_owner(any_store, "z", "q")
    # A settled node does not read the records while nothing it can see
    # changed; the write shows when it reads them all again, within
    # RELIST seconds plus this node's offset (at most half of it).
    report = node.run_round(pids(2))
    for _ in range(int(1.5 * RELIST / ROUND) + 1):
        assert not report.records_read and report.lost == 0
        clock.advance(ROUND)
        node.lease.renew_if_due()
        report = node.run_round(pids(2))
        if report.records_read:
            break
    assert report.lost == 1
    # z has no node lease, so the same round takes the partition back, above z's term
    assert report.taken_over == 1
    assert node.term(pid) == 10


def test_a_term_raise_that_finds_the_record_changed_reads_the_records_next_round(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    node = _settled_node(any_store, clock)
    assert not node.run_round(pids(2)).records_read  # settled
    pid = _rewrite_owner(any_store, "a", "old")
    assert node.raise_term(pid, 3) is None  # the record is not ours any more
    report = node.run_round(pids(2))
    assert report.records_read
    assert report.taken_over == 1 and node.term(pid) == 10


def test_a_term_raise_waits_for_a_hung_round_no_longer_than_asked(clock: VirtualClock) -> None:
    # The node's rounds loop raises terms while its ownership loop runs
    # rounds; a round hung in the store held the records' lock, and the
    # raise (so the rounds loop) waited with it.
    trap = StallingStore(MemoryStore(clock), nodes_prefix(ROOT), ("list_pages",))
    node = _settled_node(trap, clock)  # type: ignore[arg-type]
    pid = min(node.owned())
    term = node.term(pid)
    assert term is not None
    trap.hang()
    hung = threading.Thread(target=node.run_round, args=(pids(2),))
    hung.start()
    try:
        deadline = time.monotonic() + 10
        while trap.hits == 0:
            assert time.monotonic() < deadline, "the round never reached the store"
            time.sleep(0.01)
        asked = time.monotonic()
        assert node.raise_term(pid, term, wait_seconds=0.2) is None  # not now
        assert time.monotonic() - asked < 5, "it waited for the hung round"
        assert node.term(pid) == term
    finally:
        trap.release()
        hung.join(10)
    assert node.raise_term(pid, term, wait_seconds=0.2) == term + 1


def test_a_node_without_a_valid_lease_owns_nothing(clock: VirtualClock) -> None:
    store = MemoryStore(clock)
    cluster = Cluster(store, clock, pids(4))
    node = cluster.add("a")
    cluster.round()
    assert len(node.owned()) == 4
    clock.advance(POLICY.ttl_seconds)  # no renewal: the grant runs out
    assert node.owned() == frozenset()
    assert node.run_round(pids(4)).skipped == "node lease not valid"


def test_a_settled_node_lists_only_the_nodes_until_the_records_are_due(
    clock: VirtualClock,
) -> None:
    # Records are only ever read by key: a node reads every record it must
    # judge at its first round, when the partitions change, and every
    # RELIST seconds (plus the node's offset, up to half of it); when the
    # live nodes change it reads only the records that became its own. In
    # steady state a round is one LIST page of nodes and nothing else.
    store = MemoryStore(clock)
    cluster = Cluster(store, clock, pids(2500), max_moves=2000)
    for name in ("a", "b"):
        cluster.add(name)
    for _ in range(3):
        cluster.round()
    assert len(cluster.owners()) == 2500
    assert store.count("ListObjectsV2", f"{ROOT}/meta/owners/") == 0
    store.reset_counts()
    cluster.round()
    assert store.count("ListObjectsV2", f"{ROOT}/meta/nodes/") == 2  # one page each
    assert store.count("GetObject") == 0
    assert store.count("PutObject") == 2  # one renewal each (round = renew interval)
    store.reset_counts()
    for _ in range(int(1.5 * RELIST / ROUND) + 1):
        cluster.round()
    # once each in RELIST plus offset: one GET per record each node holds
    assert store.count("ListObjectsV2", f"{ROOT}/meta/owners/") == 0
    assert store.count("GetObject", f"{ROOT}/meta/owners/") == 2500
    store.reset_counts()
    before = desired_assignment(["a", "b"], pids(2500))
    after = desired_assignment(["a", "b", "c"], pids(2500))
    cluster.add("c")
    cluster.round()  # a join: c reads its share, a and b what became theirs
    assert store.count("ListObjectsV2", f"{ROOT}/meta/owners/") == 0
    became = sum(1 for p, n in after.items() if n != "c" and before[p] != n)
    share = sum(1 for n in after.values() if n == "c")
    assert store.count("GetObject", f"{ROOT}/meta/owners/") == share + became


def test_the_memory_store_answers_conditional_writes_as_s3_does(
    any_store: ObjectStore,
) -> None:
    etag = any_store.put_if_absent("k/a", b"1")
    with pytest.raises(PreconditionFailedError):
        any_store.put_if_absent("k/a", b"2")
    with pytest.raises(PreconditionFailedError):
        any_store.put_if_match("k/a", b"2", '"stale"')
    with pytest.raises(NotFoundError):
        any_store.put_if_match("k/missing", b"2", etag)
    assert any_store.put_if_match("k/a", b"1", etag) == etag  # same bytes, same ETag
    for i in range(1001):
        any_store.put(f"k/b/{i:05d}", b"x")
    pages = list(any_store.list_pages("k/b/"))
    assert [len(p) for p in pages] == [1000, 1]
    assert isinstance(any_store, MemoryStore | S3ObjectStore)


def test_a_node_joining_after_a_kill_agrees_on_the_assignment_without_a_ttl_wait(
    clock: VirtualClock,
) -> None:
    """A starting node sees a dead node's leftover lease for the first time:
    its ETag watch must wait a TTL before calling it dead (safety), but the
    assignment leaves it out at once when its lease expired long ago, so
    the joiner agrees with the others and takes its share in two rounds."""
    store = MemoryStore(clock)
    cluster = Cluster(store, clock, pids(60))
    for name in ("a", "b", "c"):
        cluster.add(name)
    cluster.round()
    cluster.killed.add("c")
    for _ in range(int(POLICY.ttl_seconds / ROUND) + 4):
        cluster.round()
    assert len(cluster.owners()) == 60
    cluster.add("d")
    cluster.round()
    cluster.round()
    assert cluster.owners() == desired_assignment(["a", "b", "d"], pids(60))


def test_records_of_a_node_whose_lease_cannot_be_read_wait_for_its_silence(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    """A live lease this version cannot read (a newer ``v``) names no
    incarnation we know: its records are protected until the lease has been
    silent for a TTL, never taken on a guess."""
    lease_key = node_lease_key(ROOT, "x")
    any_store.put(lease_key, json.dumps({"v": 99, "node": "x"}).encode())
    desired = desired_assignment(["a", "x"], pids(2))
    pid = next(p for p, n in desired.items() if n == "a")  # a's own, held by x
    any_store.put(
        owner_key(ROOT, pid),
        b'{"v":1,"node":"x","incarnation":"q","term":4,"updated_at":"2026-11-24T05:00:00Z"}',
    )
    cluster = Cluster(any_store, clock, pids(2))
    node = cluster.add("a")
    cluster.round()
    cluster.round()
    assert pid not in node.owned()
    for _ in range(int(POLICY.ttl_seconds / ROUND)):
        cluster.round()
    assert node.owned() == set(pids(2)) and node.term(pid) == 5


def test_two_nodes_racing_for_one_record_one_wins(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    """Views may disagree for a round (a node seen dead by one observer
    before the other): the CAS on the record decides, and the loser learns
    it was beaten, not that it owns the partition."""
    owners = OwnershipStore(any_store, ROOT, now=clock.now)
    pid = PartitionId("orders", 3, 0)
    assert owners.take(pid, None, "a", "1") is not None
    assert owners.take(pid, None, "b", "1") is None  # create-only: a was first
    seen = decode_owner(any_store.get(owner_key(ROOT, pid)).body, "owner")
    etag = any_store.get(owner_key(ROOT, pid)).etag
    record = OwnerRecord(seen.node, seen.incarnation, seen.term, seen.released, etag)
    won = [owners.take(pid, record, node, "2") for node in ("b", "c")]
    assert [w is not None for w in won] == [True, False]
    assert decode_owner(any_store.get(owner_key(ROOT, pid)).body, "owner").term == 2


class AnswerLostStore(StoreWrapper):
    """Applies conditional puts, then answers 412 as a retry after a lost
    answer would."""

    def put_if_absent(self, key: str, body: bytes, *, metadata: object = None) -> str:
        self._store.put_if_absent(key, body)
        raise PreconditionFailedError(f"412 after a lost answer key={key!r}")

    def put_if_match(self, key: str, body: bytes, etag: str, *, metadata: object = None) -> str:
        self._store.put_if_match(key, body, etag)
        raise PreconditionFailedError(f"412 after a lost answer key={key!r}")


def test_a_renewal_that_landed_unanswered_does_not_lose_the_node_lease(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    # Seen in `epochgc verify`: the next renewal's If-Match named the ETag
    # before the unanswered one, got 412, found a body it did not send
    # this time, and gave the lease (and every partition) up.
    store = TimesOutAfterApplyingStore(any_store)
    lease = make_lease(store, clock, "node-a")  # type: ignore[arg-type]
    assert lease.try_acquire()
    clock.advance(POLICY.renew_interval_seconds)
    store.armed = True
    assert lease.renew_if_due()
    assert lease.stats["renew_failures"] == 1
    clock.advance(POLICY.renew_interval_seconds)
    assert lease.renew_if_due()
    assert lease.is_valid()
    stored = any_store.get(lease.key)
    assert lease.etag == stored.etag
    assert decode_node_lease(stored.body, "lease").incarnation == lease.incarnation


def test_a_write_whose_answer_was_lost_counts_when_the_bytes_are_ours(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    lossy = AnswerLostStore(any_store)
    owners = OwnershipStore(lossy, ROOT, now=clock.now)  # type: ignore[arg-type]
    pid = PartitionId("orders", 3, 0)
    taken = owners.take(pid, None, "a", "1")
    assert taken is not None and taken.etag == any_store.get(owner_key(ROOT, pid)).etag
    assert owners.release(pid, taken) is not None
    lease = make_lease(lossy, clock, "node-a")  # type: ignore[arg-type]
    assert lease.try_acquire()
    clock.advance(POLICY.renew_interval_seconds)
    lease.renew()
    assert lease.is_valid() and lease.etag == any_store.get(lease.key).etag


def test_upgrade_the_first_record_starts_above_the_old_partition_leases_term(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    """A bucket from the per-partition lease design: the partition's old
    lease ``meta/leases/partition.{topic}.{revision}.{p}`` is at term 7. The
    first ownership record must start above it, so the new owner's
    ``term_start`` fences whatever the old leader left in flight; after that
    the old lease object is ignored (not read again)."""
    legacy = f"{ROOT}/meta/leases/partition.orders.3.0"
    any_store.put(
        legacy,
        b'{"v":1,"holder":"old-node/abc","term":7,"expires_at":"2026-11-24T05:00:15.000Z"}',
    )
    cluster = Cluster(any_store, clock, pids(2))
    node = cluster.add("a")
    cluster.round()
    assert node.term(PartitionId("orders", 3, 0)) == 8
    assert node.term(PartitionId("orders", 3, 1)) == 1  # no old lease: term 1
    any_store.put(
        legacy,
        b'{"v":1,"holder":"old-node/abc","term":50,"expires_at":"2026-11-24T05:00:15.000Z"}',
    )
    node.stop()
    clock.advance(ROUND)
    again = cluster.add("b")
    cluster.killed.add("a")
    cluster.round()
    assert again.term(PartitionId("orders", 3, 0)) == 9  # the record's term + 1, not 51


def test_a_take_whose_answer_was_lost_is_adopted_not_orphaned(store: S3ObjectStore) -> None:
    """A create-only take lands but its answer is an error (beyond the
    retries): the record names this node's incarnation. The next round must
    count the partition as ours, not leave it owned on paper by a live node
    that never leads it (nobody else may take it)."""
    clock = VirtualClock()
    failed: list[str] = []

    def lose_first_answer(key: str, _body: bytes) -> None:
        if "/meta/owners/" in key and not failed:
            failed.append(key)
            raise TransientStorageError("injected: answer lost")

    hooked = HookedStore(store, after_create=lose_first_answer)
    lease = make_lease(hooked, clock, "node-a")  # type: ignore[arg-type]
    assert lease.try_acquire()
    node = NodeOwnership(
        hooked,  # type: ignore[arg-type]
        ROOT,
        lease,
        max_moves_per_round=10,
        runtime=clock.runtime(),
    )
    first = node.run_round(pids(2))
    assert failed and first.conflicts == 1 and len(node.owned()) == 1
    node.run_round(pids(2))
    assert node.owned() == frozenset(pids(2))


def test_a_lost_take_is_handed_back_when_the_partition_goes_to_another_node(
    any_store: ObjectStore, clock: VirtualClock
) -> None:
    """Seen in `epochgc verify`: a take landed with its answer lost, then a
    node joined and the partition's desired owner became the newcomer. The
    taker never read the record again (it reads only the records it wants or
    knows it holds), so it neither led nor handed back the partition, and
    the newcomer waited for a hand-back that never came."""
    partitions = pids(8)
    newcomer = "node-b"
    moving = [
        p for p, n in desired_assignment(["node-a", newcomer], partitions).items() if n == newcomer
    ]
    lost: list[str] = []

    def lose_the_moving_take(key: str, _body: bytes) -> None:
        if key == owner_key(ROOT, moving[0]) and not lost:
            lost.append(key)
            raise TransientStorageError("injected: answer lost")

    cluster = Cluster(HookedStore(any_store, after_create=lose_the_moving_take), clock, partitions)
    cluster.add("node-a")
    cluster.round()
    assert lost, "the take of the partition that will move was answered with an error"
    cluster.add(newcomer)
    for _ in range(4):
        cluster.round()
    assert cluster.owners() == desired_assignment(["node-a", newcomer], partitions)


def test_a_round_says_when_a_silent_node_would_be_judged_dead(clock: VirtualClock) -> None:
    # The reconciler's ownership loop looks again at that moment instead of
    # at its next regular round, so failover is a TTL after the silence was
    # first seen, not up to a round more.
    store = MemoryStore(clock)
    cluster = Cluster(store, clock, pids(4))
    a = cluster.add("a")
    cluster.add("b")
    first_seen = clock.monotonic()
    cluster.round()  # a sees b's lease version for the first time
    cluster.killed.add("b")  # b never renews again
    a.lease.renew_if_due()
    report = a.run_round(pids(4))
    assert report.next_stale_at == first_seen + POLICY.ttl_seconds
    clock.advance(report.next_stale_at - clock.monotonic() - 0.1)
    a.lease.renew_if_due()
    assert a.run_round(pids(4)).taken_over == 0  # not yet: b was silent for less than a TTL
    clock.advance(0.15)
    a.lease.renew_if_due()
    late = a.run_round(pids(4))
    assert late.taken_over == 2 and len(a.owned()) == 4
    assert late.next_stale_at is None  # nobody else left to watch


def _old_release_lease(
    store: ObjectStore, clock: VirtualClock, node: str, *, released: bool
) -> None:
    """The lease a node of an older release writes: no ``assignment`` field."""
    at = clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
    doc = {"v": 1, "node": node, "incarnation": "old", "renewed_at": at, "expires_at": at}
    if released:
        doc["released"] = True
    store.put(node_lease_key(ROOT, node), json.dumps(doc).encode())


def test_a_cluster_computes_the_oldest_assignment_version_while_an_old_node_is_live(
    any_store: ObjectStore, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """During a rolling upgrade every node computes the version the oldest
    live node computes, so old and new nodes never disagree on who should
    own a partition; once the old node is gone the cluster moves to the new
    version."""
    cluster = Cluster(any_store, clock, pids(60))
    cluster.add("a")
    cluster.add("b")
    caplog.set_level("INFO", logger="epochgc.ownership.node_ownership")
    for _ in range(6):
        _old_release_lease(any_store, clock, "old", released=False)
        cluster.round()
    old_desired = desired_assignment(["a", "b", "old"], pids(60), version=1)
    assert cluster.owners() == {p: n for p, n in old_desired.items() if n != "old"}
    assert "computing ownership assignment version 1" in caplog.text

    _old_release_lease(any_store, clock, "old", released=True)
    for _ in range(6):
        cluster.round()
    assert cluster.owners() == desired_assignment(["a", "b"], pids(60), version=2)
    assert "computing ownership assignment version 2" in caplog.text


class _SlowDownOnRecords(StoreWrapper):
    """Answers SlowDown (after the store's retries) to reads of ownership
    records while ``throttled``."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__(store)
        self.throttled = False

    def _check(self, key: str) -> None:
        if self.throttled and "/meta/owners/" in key:
            raise TransientStorageError(f"SlowDown on {key}")

    def get(self, key: str, **kwargs: object) -> object:
        self._check(key)
        return self._store.get(key, **kwargs)

    def list_pages(self, prefix: str, **kwargs: object) -> object:
        self._check(prefix)
        return self._store.list_pages(prefix, **kwargs)


def test_a_node_answered_slowdown_skips_rounds_and_keeps_its_lease(clock: VirtualClock) -> None:
    store = _SlowDownOnRecords(MemoryStore(clock))
    cluster = Cluster(store, clock, pids(40))  # type: ignore[arg-type]
    node = cluster.add("a")
    store.throttled = True
    for _ in range(5):
        report = node.run_round(pids(40))
        assert report.skipped.startswith("SlowDown")
        clock.advance(ROUND)
        node.lease.renew_if_due()
        assert node.lease.is_valid()
    store.throttled = False
    for _ in range(2):
        cluster.round()
    assert node.owned() == set(pids(40))


class _PairedRecordReads(StoreWrapper):
    """Each GET of an ownership record waits until another one is in flight
    with it: GETs sent one after another break the barrier."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__(store)
        self.paired = threading.Barrier(2, timeout=10)

    def get(self, key: str, **kwargs: object) -> object:
        if "/meta/owners/" in key:
            self.paired.wait()
        return self._store.get(key, **kwargs)


def test_a_round_reads_its_records_side_by_side(clock: VirtualClock) -> None:
    """A hundred records read one after another at 20 ms are two seconds of
    a five-second round: a node's first round sends its GETs together."""
    store = _PairedRecordReads(MemoryStore(clock))
    node = Cluster(store, clock, pids(8)).add("a")  # type: ignore[arg-type]
    report = node.run_round(pids(8))
    assert not report.skipped and report.gets == 8 and report.taken == 8


def test_a_node_among_many_reads_few_lease_bodies_on_first_sight(clock: VirtualClock) -> None:
    """A thousand nodes starting together must not each GET every other
    node's lease: a refresh reads at most ``body_burst_limit // nodes`` bodies
    of nodes new to it, but at once the body of a node that holds a record
    it must judge (its incarnation decides whether the record is stale)."""
    store = MemoryStore(clock)
    others = [f"n{i:02d}" for i in range(30)]
    for name in others:
        assert make_lease(store, clock, name).try_acquire()
    desired = desired_assignment(["a", *others], pids(62))
    pid = next(p for p, n in desired.items() if n == "a")
    holder = make_lease(store, clock, "n29")  # the same lease, read back
    held_by = decode_node_lease(store.get(node_lease_key(ROOT, "n29")).body, "n29")
    assert not holder.try_acquire()  # n29 is live: its record is protected
    OwnershipStore(store, ROOT, now=clock.now).take(pid, None, "n29", held_by.incarnation)
    node = Cluster(store, clock, pids(62)).add("a")
    node.view.body_burst_limit = 31  # 31 nodes: one unseen body a refresh
    store.reset_counts()
    report = node.run_round(pids(62))
    # n00 (the first unseen) and n29 (named by a record of a's share)
    assert store.count("GetObject", f"{ROOT}/meta/nodes/") == 2
    assert pid not in node.owned() and report.taken == len(node.owned()) > 0
    store.reset_counts()
    node.run_round(pids(62))
    assert store.count("GetObject", f"{ROOT}/meta/nodes/") == 1  # the next unseen only


def test_a_release_shows_at_once_even_from_a_node_whose_lease_was_never_read(
    clock: VirtualClock,
) -> None:
    """At a thousand nodes a node has read few peers' lease bodies: a clean
    stop must still count at its next round (the lease's size changed in
    the listing), not a TTL later, or a leave of ten takes five rounds."""
    store = MemoryStore(clock)
    others = [f"n{i:02d}" for i in range(30)]
    leases = {name: make_lease(store, clock, name) for name in others}
    for lease in leases.values():
        assert lease.try_acquire()
    node = Cluster(store, clock, pids(62)).add("a")
    node.view.body_burst_limit = 31  # one unseen body a refresh: n00 first
    node.run_round(pids(62))

    def share(nodes: list[str]) -> set[PartitionId]:
        return {p for p, n in desired_assignment(["a", *nodes], pids(62)).items() if n == "a"}

    before = share(others)
    assert node.owned() == before
    # a leaver whose share a inherits, and whose body a has not read (n00 was read)
    leaver = next(n for n in others[1:] if share([o for o in others if o != n]) != before)
    leases[leaver].release()
    report = node.run_round(pids(62))
    after = share([o for o in others if o != leaver])
    assert node.owned() == after and report.taken == len(after - before) > 0


class _ShiftedStamps(StoreWrapper):
    """Lists the LastModified of the node leases in ``shifted`` moved by
    that many seconds: a store whose gateways' clocks disagree."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__(store)
        self.shifted: dict[str, float] = {}

    def _listed(self, info: ObjectInfo) -> ObjectInfo:
        shift = next((s for n, s in self.shifted.items() if info.key.endswith(f"/{n}")), 0.0)
        return dataclasses.replace(
            info, last_modified=info.last_modified + timedelta(seconds=shift)
        )

    def list_pages(self, prefix: str, **kwargs: object) -> Iterator[list[ObjectInfo]]:
        for page in self._store.list_pages(prefix, **kwargs):  # type: ignore[arg-type]
            yield [self._listed(info) for info in page]


def _renewal_then_kill(
    clock: VirtualClock, cluster: Cluster
) -> tuple[NodeOwnership, NodeOwnership, float]:
    """a and b settle; both renew, b is killed at once, and a first sees
    b's last renewal almost a round later. Returns a, b and when b's last
    renewal was sent."""
    a, b = cluster.add("a"), cluster.add("b")
    clock.advance(0.3)  # off whole seconds: the stamps are truncated
    a.run_round(pids(4))
    b.run_round(pids(4))  # a has seen b's first version
    clock.advance(POLICY.renew_interval_seconds)
    a.run_round(pids(4))  # a lists once a round: b's version unchanged
    assert a.lease.renew_if_due() and b.lease.renew_if_due()
    renewed = clock.monotonic()
    cluster.killed.add("b")
    clock.advance(ROUND - 0.1)
    return a, b, renewed


def test_a_dead_node_is_judged_a_ttl_after_its_last_renewal_not_after_it_was_seen(
    clock: VirtualClock,
) -> None:
    """A survivor lists the nodes once a round, so it may first see a
    renewal a round after it was written: the store's stamps (b's lease
    against a's own, in one listing) start the watch at the renewal, give or
    take their one-second resolution, so failover is the TTL, not the TTL
    plus a round."""
    store = _ShiftedStamps(MemoryStore(clock, whole_second_stamps=True))
    cluster = Cluster(store, clock, pids(4))  # type: ignore[arg-type]
    a, b, renewed = _renewal_then_kill(clock, cluster)
    report = a.run_round(pids(4))
    assert report.next_stale_at is not None
    assert report.next_stale_at <= renewed + POLICY.ttl_seconds + STAMP_RESOLUTION_SECONDS
    while clock.monotonic() < report.next_stale_at - 0.05:  # a keeps its own lease
        clock.advance(min(1.0, report.next_stale_at - 0.05 - clock.monotonic()))
        a.lease.renew_if_due()
    assert a.run_round(pids(4)).taken_over == 0  # not a moment before
    clock.advance(0.05)
    late = a.run_round(pids(4))
    assert late.taken_over == 2 and len(a.owned()) == 4
    assert clock.monotonic() > b.lease.valid_until  # b had stopped acting
    assert clock.monotonic() - renewed <= POLICY.ttl_seconds + STAMP_RESOLUTION_SECONDS


class _RecordedGets(StoreWrapper):
    """Records the key of every GET."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__(store)
        self.keys: list[str] = []

    def get(self, key: str, **kwargs: object) -> object:
        self.keys.append(key)
        return self._store.get(key, **kwargs)


def test_the_takeover_round_does_not_read_the_dead_nodes_lease_body(clock: VirtualClock) -> None:
    """Each request of a takeover round is one more step in sequence before
    the dead node's partitions are owned again. The body of a lease this
    node has watched stale, at the version listed, cannot change the
    decision: that node is dead whatever incarnation its body names."""
    recorded = _RecordedGets(_ShiftedStamps(MemoryStore(clock, whole_second_stamps=True)))
    cluster = Cluster(recorded, clock, pids(4))  # type: ignore[arg-type]
    a, _b, _renewed = _renewal_then_kill(clock, cluster)
    stale_at = a.run_round(pids(4)).next_stale_at
    assert stale_at is not None
    while clock.monotonic() < stale_at:
        clock.advance(min(1.0, stale_at - clock.monotonic()))
        a.lease.renew_if_due()
    recorded.keys.clear()
    takeover = a.run_round(pids(4))
    assert takeover.taken_over == 2
    assert [k for k in recorded.keys if k.startswith(nodes_prefix(ROOT))] == []


def test_without_store_timestamps_the_watch_starts_at_first_sight(clock: VirtualClock) -> None:
    store = _ShiftedStamps(MemoryStore(clock, whole_second_stamps=True))
    cluster = Cluster(store, clock, pids(4), store_timestamps=False)  # type: ignore[arg-type]
    a, _b, renewed = _renewal_then_kill(clock, cluster)
    report = a.run_round(pids(4))
    assert report.next_stale_at == renewed + ROUND - 0.1 + POLICY.ttl_seconds


def test_stamps_that_contradict_a_listing_are_not_used_again(
    clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """b's gateway stamps ten seconds slow: its renewal would look older
    than the listing that still showed its previous version. The survivor
    says so once and falls back to when it saw the renewal."""
    store = _ShiftedStamps(MemoryStore(clock, whole_second_stamps=True))
    cluster = Cluster(store, clock, pids(4))  # type: ignore[arg-type]
    store.shifted["b"] = -10.0
    a, _b, renewed = _renewal_then_kill(clock, cluster)
    report = a.run_round(pids(4))
    assert report.next_stale_at == renewed + ROUND - 0.1 + POLICY.ttl_seconds
    assert "not using the store's stamps for failover" in caplog.text
    assert "node b's lease write" in caplog.text


def test_a_released_lease_is_not_waited_for(clock: VirtualClock) -> None:
    """A node that left cleanly is gone at once: its lease is no silent
    node to look at again when it would turn stale (a thousand nodes would
    all look at that one moment)."""
    store = MemoryStore(clock, whole_second_stamps=True)
    cluster = Cluster(store, clock, pids(4))
    a, b = cluster.add("a"), cluster.add("b")
    cluster.round()
    assert a.run_round(pids(4)).next_stale_at is not None  # b is watched
    b.stop()
    cluster.killed.add("b")
    clock.advance(1.0)
    report = a.run_round(pids(4))
    assert report.next_stale_at is None and len(a.owned()) == 4


@pytest.mark.parametrize("retried", [False, True], ids=["error", "retried-412"])
def test_a_term_raise_whose_answer_was_lost_does_not_orphan_the_partition(
    clock: VirtualClock, retried: bool
) -> None:
    """Defect A of the simulation issue (seed 82 of `epochgc simulate`
    before the fix): a term raise landed but its answer was lost. The node
    kept its old record (old ETag); once the partition left its share (a
    node joined) its hand-back named the old ETag and failed, and nothing
    read the record again: it named a live node that never led it, so no
    other node might take it. The retried raise (412) dropped it the same
    way."""
    partitions = pids(8)
    newcomer = "node-b"
    moving = next(
        p for p, n in desired_assignment(["node-a", newcomer], partitions).items() if n == newcomer
    )
    lossy = TimesOutAfterApplyingStore(MemoryStore(clock), key_part=owner_key(ROOT, moving))
    cluster = Cluster(lossy, clock, partitions)  # type: ignore[arg-type]
    node_a = cluster.add("node-a")
    cluster.round()
    assert moving in node_a.owned()
    lossy.armed = True
    with pytest.raises(TransientStorageError):
        node_a.raise_term(moving, node_a.term(moving) or 0)
    assert not lossy.armed, "the raise was applied and its answer lost"
    if retried:
        clock.advance(1.0)  # a later retry writes other bytes (its time)
        assert node_a.raise_term(moving, 1) is None  # 412: the record is not as we wrote it
    cluster.add(newcomer)
    for _ in range(6):
        cluster.round()
    assert cluster.owners() == desired_assignment(["node-a", newcomer], partitions)


class LandsLateStore(StoreWrapper):
    """The next ``put_if_match`` on ``key`` reaches the store only after
    ``meanwhile`` ran (time passing, peers acting), as a request delayed by
    client retries or a slow connect does."""

    def __init__(self, store: ObjectStore, key: str) -> None:
        super().__init__(store)
        self._key = key
        self.meanwhile: Callable[[], None] | None = None

    def put_if_match(
        self, key: str, body: bytes, etag: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        if key == self._key and self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return str(self._store.put_if_match(key, body, etag, metadata=metadata))


def test_a_renewal_answered_after_its_grant_ended_does_not_resurrect_the_old_ownership(
    clock: VirtualClock,
) -> None:
    """Defect B of the simulation issue (seed 230 of `epochgc simulate`
    before the fix): node-a's renewals failed until just before its grant
    ran out; the last one, sent in time, reached the store 3 s later, after
    node-b had judged node-a dead and taken its partitions. Counted from
    its send time, that renewal made node-a valid again with its old
    records: both nodes owned the same partitions."""
    partitions = pids(4)
    store = LandsLateStore(MemoryStore(clock), node_lease_key(ROOT, "node-a"))
    cluster = Cluster(store, clock, partitions)  # type: ignore[arg-type]
    node_a, node_b = cluster.add("node-a"), cluster.add("node-b")
    for _ in range(3):
        cluster.round()
    held_by_a = set(node_a.owned())
    assert held_by_a
    while node_a.lease.valid_until - clock.monotonic() > 1.0:  # node-a's renewals fail
        clock.advance(0.5)
        node_b.lease.renew_if_due()
        node_b.run_round(partitions)

    def node_b_takes_over() -> None:
        clock.advance(3.0)
        node_b.lease.renew_if_due()
        node_b.run_round(partitions)

    store.meanwhile = node_b_takes_over
    node_a.lease.renew()  # sent while valid, lands after node-b took over
    assert store.meanwhile is None
    assert held_by_a <= node_b.owned(), "node-b judged node-a dead and took its partitions"
    assert not node_a.owned() & node_b.owned()


def test_balance_stops_reading_stamps_once_they_are_found_inconsistent(
    clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by `epochgc simulate` (seeds 37, 100 and 312 with one gateway
    about 30 s slow): balance leaves out nodes whose lease the stamps put
    two TTLs before this node's own, and went on doing so after the same
    node had found the stamps inconsistent. b, whose renewals a slow
    gateway stamps 40 s early, stayed out of a's assignment: the two nodes
    computed different shares and handed partitions back and forth for
    ever, each hand-back a partition unled for a round."""
    partitions = pids(4)
    store = _ShiftedStamps(MemoryStore(clock, whole_second_stamps=True))
    store.shifted["b"] = -40.0
    cluster = Cluster(store, clock, partitions)  # type: ignore[arg-type]
    cluster.add("a")
    cluster.add("b")
    for _ in range(8):
        cluster.round()
    assert "not using the store's stamps for failover" in caplog.text
    balanced = desired_assignment(["a", "b"], partitions)
    for _ in range(4):
        cluster.round()
        assert cluster.owners() == balanced


def test_stamps_are_not_read_across_a_long_gap_between_listings(clock: VirtualClock) -> None:
    """Found by `epochgc simulate` (seed 169, a gateway 25 s off): stamps
    are checked against the previous listing this node judged, and a
    stamp that puts a write before it is a contradiction. After a long gap
    between two listings (the node paused, then waited for its lease) that
    check cannot tell: a's own lease, stamped 25 s ahead, put b's latest
    renewal 25 s in the past, b was judged dead at first sight of it, and
    a took b's partitions while b held them."""
    partitions = pids(4)
    store = _ShiftedStamps(MemoryStore(clock, whole_second_stamps=True))
    store.shifted["a"] = 25.0
    cluster = Cluster(store, clock, partitions)  # type: ignore[arg-type]
    a, b = cluster.add("a"), cluster.add("b")
    a.run_round(partitions)  # a sees b's lease for the first time
    for _ in range(30):  # a's rounds stall for 30 s; both keep their leases
        clock.advance(1.0)
        a.lease.renew_if_due()
        b.lease.renew_if_due()
        b.run_round(partitions)
    assert b.owned()
    a.run_round(partitions)
    cluster.assert_single_owners()
