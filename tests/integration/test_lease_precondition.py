"""Leases when a conditional write is answered 412: a renewal or release
counts as done only if the lease object now holds exactly the bytes we
wrote (our write landed, only the answer was lost); otherwise the lease is
lost, logged as such, and writing for it stops at once. A failed take-over
says why. The store that answers 412 to every ``If-Match`` emulates Ceph
RGW 16, which rejects the quoted ETag it has just returned."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from epochgc.errors import LeaseLostError, PreconditionFailedError
from epochgc.leases.role_leases import LeaseDocument, LeaseManager, decode_lease, encode_lease
from epochgc.runtime import Runtime
from epochgc.storage.keys import lease_key
from epochgc.storage.s3 import S3ObjectStore
from tests.integration.test_leases_and_leaders import POLICY, ROOT, Clock
from tests.support.events import lost_into
from tests.support.faults import RejectIfMatchStore
from tests.support.wrapping import StoreWrapper

NAME = "gc"


class AnswerLostStore(StoreWrapper):
    """Applies every ``If-Match`` PUT, then answers 412 as a retried request
    whose first attempt landed would be."""

    def put_if_match(self, key: str, body: bytes, etag: str, *, metadata: Any = None) -> str:
        self._store.put_if_match(key, body, etag, metadata=metadata)
        raise PreconditionFailedError(f"412 after the write landed key={key!r}")


def leases(store: Any, clock: Clock, node: str = "node-a", **kwargs: Any) -> LeaseManager:
    return LeaseManager(
        store,
        ROOT,
        node,
        policy=POLICY,
        runtime=Runtime(wall=clock, monotonic=clock.monotonic),
        **kwargs,
    )


def test_a_renewal_answered_412_is_a_lost_lease_even_if_holder_and_term_match(
    store: S3ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    lost: list[str] = []
    manager = leases(RejectIfMatchStore(store), clock, events=lost_into(lost))
    assert manager.try_acquire(NAME) is not None
    clock.advance(5)
    with (
        caplog.at_level(logging.WARNING, "epochgc.leases"),
        pytest.raises(LeaseLostError),
    ):
        manager.renew(NAME)
    assert lost == [NAME], "the owner is told at once"
    with pytest.raises(LeaseLostError):
        manager.check(NAME)
    assert manager.held() == []
    [record] = [r for r in caplog.records if "lost lease gc" in r.getMessage()]
    assert "rejected" in record.getMessage() and "ETag" in record.getMessage()


def test_a_renewal_whose_answer_was_lost_but_landed_is_kept(store: S3ObjectStore) -> None:
    clock = Clock()
    manager = leases(AnswerLostStore(store), clock)
    assert manager.try_acquire(NAME) is not None
    clock.advance(5)
    grant = manager.renew(NAME)
    stored = store.get(lease_key(ROOT, NAME))
    assert grant.etag == stored.etag
    assert decode_lease(stored.body, "lease").expires_at == grant.expires_at
    assert manager.check(NAME) == grant


def test_a_release_answered_412_counts_only_if_the_release_landed(
    store: S3ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    landed = leases(AnswerLostStore(store), clock, node="node-a")
    assert landed.try_acquire(NAME) is not None
    with caplog.at_level(logging.INFO, "epochgc.leases"):
        landed.release(NAME)
    assert decode_lease(store.get(lease_key(ROOT, NAME)).body, "lease").released
    assert any("released lease gc" in r.getMessage() for r in caplog.records)
    assert not any("could not release" in r.getMessage() for r in caplog.records)

    caplog.clear()
    refused = leases(RejectIfMatchStore(store), clock, node="node-b")
    assert refused.try_acquire(NAME) is None  # a released lease is taken by CAS: refused
    other = "other-lease"
    assert refused.try_acquire(other) is not None  # created: no If-Match
    with caplog.at_level(logging.INFO, "epochgc.leases"):
        refused.release(other)
    assert not decode_lease(store.get(lease_key(ROOT, other)).body, "lease").released
    [warning] = [r for r in caplog.records if "could not release" in r.getMessage()]
    assert "expire" in warning.getMessage()


def test_a_failed_take_over_says_why(
    store: S3ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    a = leases(store, clock, node="node-a")
    b = leases(RejectIfMatchStore(store), clock, node="node-b")
    assert a.try_acquire(NAME) is not None
    assert b.try_acquire(NAME) is None  # first sight of a's grant
    clock.advance(POLICY.ttl_seconds)  # a is silent: b may take over
    with caplog.at_level(logging.INFO, "epochgc.leases"):
        assert b.try_acquire(NAME) is None
    [message] = [r.getMessage() for r in caplog.records if "take-over" in r.getMessage()]
    assert "had not changed" in message and "check-store" in message

    caplog.clear()

    def someone_else_first(key: str, body: bytes, etag: str, **kwargs: Any) -> str:
        store.put_if_match(key, encode_lease(LeaseDocument("node-d/1", 7, clock())), etag)
        return store.put_if_match(key, body, etag, **kwargs)

    c = leases(RacingStore(store, someone_else_first), clock, node="node-c")
    assert c.try_acquire(NAME) is None
    clock.advance(POLICY.ttl_seconds)
    with caplog.at_level(logging.INFO, "epochgc.leases"):
        assert c.try_acquire(NAME) is None
    [message] = [r.getMessage() for r in caplog.records if "take-over" in r.getMessage()]
    assert "someone else moved first" in message and "node-d/1" in message


class RacingStore(StoreWrapper):
    """Runs ``put_if_match`` through a hook (which may write first)."""

    def __init__(self, store: S3ObjectStore, hook: Any) -> None:
        super().__init__(store)
        self._hook = hook

    def put_if_match(self, key: str, body: bytes, etag: str, *, metadata: Any = None) -> str:
        return str(self._hook(key, body, etag, metadata=metadata))
