"""The lease core: the pure take-over rule, the one diagnosis of a write
that did not land, the writes over a store, and the property every lease
rests on: whatever the interleaving, at most one holder's grant is valid
at any moment of the (shared) monotonic clock."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.errors import LeaseLostError, TransientStorageError
from epochgc.leases.core import (
    AcquireDecision,
    CasLease,
    Refused,
    Written,
    decide_acquire,
    explain_refusal,
)
from epochgc.leases.holder_codec import LeaseDocument, decode_lease, encode_lease
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.role_leases import LeaseManager
from epochgc.leases.timing import LeasePolicy
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.storage.keys import lease_key
from tests.support.faults import RejectIfMatchStore, TimesOutAfterApplyingStore

TTL = 15.0
POLICY = LeasePolicy(ttl_seconds=TTL, renew_interval_seconds=5, skew_margin_seconds=2)
KEY = lease_key("epochgc", "gc")


@dataclass(frozen=True)
class Doc:
    released: bool = False

    def who(self) -> str:
        return "someone"


@pytest.mark.parametrize(
    ("current", "ours", "holding", "unchanged_for", "decision"),
    [
        (None, False, False, None, AcquireDecision.CREATE),
        (None, True, True, None, AcquireDecision.CREATE),
        (Doc(), False, False, None, AcquireDecision.WAIT),
        (Doc(), False, False, TTL - 0.1, AcquireDecision.WAIT),
        (Doc(), False, False, TTL, AcquireDecision.TAKE_OVER),
        (Doc(released=True), False, False, None, AcquireDecision.TAKE_OVER),
        (Doc(), True, True, None, AcquireDecision.RENEW),
        (Doc(), True, False, None, AcquireDecision.TAKE_OVER),
        (Doc(released=True), True, True, None, AcquireDecision.RENEW),
    ],
)
def test_decide_acquire(
    current: Doc | None,
    ours: bool,
    holding: bool,
    unchanged_for: float | None,
    decision: AcquireDecision,
) -> None:
    got = decide_acquire(
        current, ours=ours, holding=holding, unchanged_for=unchanged_for, ttl_seconds=TTL
    )
    assert got is decision


@given(
    exists=st.booleans(),
    released=st.booleans(),
    ours=st.booleans(),
    holding=st.booleans(),
    unchanged_for=st.none()
    | st.floats(min_value=TTL - 5, max_value=TTL + 1)  # around the threshold
    | st.floats(min_value=0, max_value=10 * TTL),
)
def test_the_take_over_rule(
    exists: bool, released: bool, ours: bool, holding: bool, unchanged_for: float | None
) -> None:
    """Created only when missing; renewed only when ours and held; someone
    else's live lease is taken only when released or unchanged for a TTL."""
    current = Doc(released) if exists else None
    decision = decide_acquire(
        current, ours=ours, holding=holding, unchanged_for=unchanged_for, ttl_seconds=TTL
    )
    assert (decision is AcquireDecision.CREATE) is (not exists)
    assert (decision is AcquireDecision.RENEW) is (exists and ours and holding)
    if exists and not ours:
        gone = released or (unchanged_for is not None and unchanged_for >= TTL)
        assert decision is (AcquireDecision.TAKE_OVER if gone else AcquireDecision.WAIT)
    if ours:
        assert decision is not AcquireDecision.WAIT, "our own lease is never waited for"


def lease(store: Any, clock: VirtualClock) -> CasLease[LeaseDocument]:
    return CasLease(store, KEY, POLICY, decode_lease, clock.runtime())


def body(clock: VirtualClock, holder: str = "me/1", term: int = 1) -> bytes:
    return encode_lease(LeaseDocument(holder, term, clock.now()))


def take(cas: CasLease[LeaseDocument], data: bytes) -> Written | Refused:
    seen = cas.look()
    decision = decide_acquire(
        seen.doc, ours=False, holding=False, unchanged_for=seen.unchanged_for, ttl_seconds=TTL
    )
    return cas.take(decision, seen, data)


def test_writes_and_the_validity_deadline() -> None:
    clock, store = VirtualClock(), MemoryStore()
    cas = lease(store, clock)
    created = take(cas, body(clock))
    assert isinstance(created, Written)
    assert created.valid_until == clock.monotonic() + TTL - 2
    assert cas.is_valid(created.valid_until)
    clock.advance(5)
    renewed = cas.renew(created.etag, body(clock))
    assert isinstance(renewed, Written) and renewed.etag == store.get(KEY).etag
    assert renewed.valid_until == created.valid_until + 5
    clock.advance(TTL)
    assert not cas.is_valid(renewed.valid_until)
    released = encode_lease(LeaseDocument("me/1", 1, clock.now(), released=True))
    assert cas.release(renewed.etag, released) is None
    assert decode_lease(store.get(KEY).body, KEY).released


def test_someone_else_moving_first_is_a_lost_race() -> None:
    clock, store = VirtualClock(), MemoryStore()
    mine, theirs = lease(store, clock), lease(store, clock)
    seen = mine.look()
    assert isinstance(take(theirs, body(clock, "them/1", 4)), Written)
    refused = mine.take(AcquireDecision.CREATE, seen, body(clock))
    assert isinstance(refused, Refused) and not refused.store_ignores_if_match
    assert refused.level == logging.INFO
    assert refused.why == "someone else moved first (412); now held by them/1 at term 4"


def test_a_store_that_rejects_its_own_etag_is_named_whatever_the_write() -> None:
    """The one diagnostic, for a take-over, a renewal and a release alike."""
    clock, store = VirtualClock(), MemoryStore()
    cas = lease(RejectIfMatchStore(store), clock)
    created = take(cas, body(clock))
    assert isinstance(created, Written)
    seen = cas.look()
    clock.advance(1)  # new bytes: not the stored ones
    outcomes = [
        cas.take(AcquireDecision.TAKE_OVER, seen, body(clock, term=2)),
        cas.renew(created.etag, body(clock)),
        cas.release(created.etag, body(clock)),
    ]
    for refused in outcomes:
        assert isinstance(refused, Refused) and refused.store_ignores_if_match
        assert refused.level == logging.WARNING
        assert f"rejected (412) the ETag it had returned ({created.etag})" in refused.why
        assert "does not honour If-Match (run `epochgc check-store`)" in refused.why


def test_both_lease_kinds_name_a_store_that_ignores_if_match(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The drifted diagnostics are one: the node lease used to say only
    that the object changed under it."""
    clock, store = VirtualClock(), MemoryStore()
    broken = RejectIfMatchStore(store)
    clocks: dict[str, Any] = {"policy": POLICY, "runtime": clock.runtime()}
    role = LeaseManager(broken, "epochgc", "n1", **clocks)
    node = NodeLease(broken, "epochgc", "n1", **clocks)
    assert role.try_acquire("gc") is not None and node.try_acquire()
    clock.advance(5)
    with caplog.at_level(logging.WARNING, "epochgc.leases"), pytest.raises(LeaseLostError):
        role.renew("gc")
    with caplog.at_level(logging.WARNING, "epochgc.leases"), pytest.raises(LeaseLostError):
        node.renew()
    lost = {r.name: r.getMessage() for r in caplog.records if "lost" in r.getMessage()}
    assert lost.keys() == {"epochgc.leases.role_leases", "epochgc.leases.node_lease"}
    for message in lost.values():
        assert "renewal not applied: the store rejected (412) the ETag it had returned" in message
        assert "does not honour If-Match (run `epochgc check-store`)" in message


@pytest.mark.parametrize("lost_meanwhile", [False, True])
def test_a_renewal_that_landed_unanswered_is_ours_until_the_lease_is_lost(
    lost_meanwhile: bool,
) -> None:
    clock, store = VirtualClock(), MemoryStore()
    lossy = TimesOutAfterApplyingStore(store)
    cas = lease(lossy, clock)
    created = take(cas, body(clock))
    assert isinstance(created, Written)
    clock.advance(5)
    lossy.armed = True
    with pytest.raises(TransientStorageError):
        cas.renew(created.etag, body(clock))
    if lost_meanwhile:
        cas.forget_unanswered()
    clock.advance(5)
    renewed = cas.renew(created.etag, body(clock))
    if lost_meanwhile:
        assert isinstance(renewed, Refused)
        assert renewed.why.startswith("the lease changed under us (412): now held by me/1")
    else:
        assert isinstance(renewed, Written) and renewed.etag == store.get(KEY).etag


def test_explain_refusal_of_a_gone_or_unreadable_object() -> None:
    store = MemoryStore()
    assert (
        "the lease object is gone" in explain_refusal('"e"', None, decode_lease, taking=False).why
    )
    store.put(KEY, b"not json")
    refused = explain_refusal('"e"', store.get(KEY), decode_lease, taking=False)
    assert refused.why.startswith("the lease changed under us (412): now the lease object is")
    assert "unreadable" in refused.why


# --- at most one valid holder -------------------------------------------------------------

steps = st.lists(
    st.tuples(
        st.sampled_from([float(s) for s in range(int(TTL) + 1)]),  # seconds that pass first
        st.integers(0, 1),  # who acts
        st.booleans() | st.just(False),  # it releases (else: renews if valid, else acquires)
    ),
    min_size=2,
    max_size=20,
)
"""Two processes wanting one lease, as a heartbeat and a standby would
behave: each step, time passes, then one of them acts."""


Ops = dict[str, Callable[[], object]]


def role_ops(leases: LeaseManager) -> Ops:
    return {
        "acquire": lambda: leases.try_acquire("gc"),
        "renew": lambda: leases.renew("gc"),
        "release": lambda: leases.release("gc"),
        "valid": lambda: leases.grant("gc") is not None,
    }


def node_ops(lease: NodeLease) -> Ops:
    return {
        "acquire": lease.try_acquire,
        "renew": lease.renew,
        "release": lease.release,
        "valid": lease.is_valid,
    }


def run(steps: list[tuple[float, int, bool]], holders: list[Ops], clock: VirtualClock) -> None:
    for seconds, who, release in steps:
        clock.advance(seconds)
        holder = holders[who]
        op = "release" if release else "renew" if holder["valid"]() else "acquire"
        with contextlib.suppress(LeaseLostError):  # the renewal came too late
            holder[op]()
        assert sum(bool(h["valid"]()) for h in holders) <= 1, f"two holders after {who} {op}"


@settings(max_examples=300, deadline=None)
@given(steps)
def test_at_most_one_role_lease_holder_whatever_the_interleaving(
    steps: list[tuple[float, int, bool]],
) -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    holders = [
        role_ops(
            LeaseManager(
                store,
                "epochgc",
                f"n{i}",
                policy=POLICY,
                runtime=clock.runtime(),
            )
        )
        for i in range(2)
    ]
    run(steps, holders, clock)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_at_most_one_node_lease_incarnation_whatever_the_interleaving(
    steps: list[tuple[float, int, bool]],
) -> None:
    """Two processes of the same node id (a restart, a split brain)."""
    clock = VirtualClock()
    store = MemoryStore(clock)
    holders = [
        node_ops(
            NodeLease(
                store,
                "epochgc",
                "n1",
                policy=POLICY,
                runtime=clock.runtime(),
            )
        )
        for _ in range(2)
    ]
    run(steps, holders, clock)
