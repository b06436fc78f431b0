"""The fault-injecting store over the embedded S3: each kind of fault does
what it claims, seeded, and switching faults off restores a clean store."""

from __future__ import annotations

import pytest

from epochgc.errors import NotFoundError, RetriesExhaustedError
from epochgc.events import EventChannel
from epochgc.storage.object_store import Throttled
from epochgc.storage.s3 import S3ObjectStore
from epochgc.verify.faults import FaultPlan, FaultyStore

NONE = FaultPlan(error=0, slowdown=0, unknown_outcome=0, latency=0, partial_delete=0)


def test_errors_fail_before_the_request_is_sent(store: S3ObjectStore) -> None:
    faulty = FaultyStore(store, FaultPlan(error=1.0, slowdown=0, unknown_outcome=0), seed=1)
    with pytest.raises(RetriesExhaustedError, match="injected 503"):
        faulty.put("k", b"v")
    with pytest.raises(NotFoundError):
        store.head("k")
    assert faulty.injected["error"] == 1


def test_an_unknown_outcome_is_applied_then_fails(store: S3ObjectStore) -> None:
    plan = FaultPlan(error=0, slowdown=0, unknown_outcome=1.0, latency=0)
    faulty = FaultyStore(store, plan, seed=1)
    with pytest.raises(RetriesExhaustedError, match="after PutObject k was applied"):
        faulty.put_if_absent("k", b"v")
    assert store.get("k").body == b"v"


def test_slowdown_is_published_as_throttled(store: S3ObjectStore) -> None:
    events = EventChannel()
    plan = FaultPlan(error=0, slowdown=1.0, unknown_outcome=0)
    faulty = FaultyStore(store, plan, seed=1, events=events)
    throttles: list[Throttled] = []
    events.subscribe(Throttled, throttles.append)
    with pytest.raises(RetriesExhaustedError, match="SlowDown"):
        faulty.get("k")
    assert throttles == [Throttled("GetObject")]


def test_partial_deletes_report_the_keys_left(store: S3ObjectStore) -> None:
    keys = [f"k{i}" for i in range(20)]
    for key in keys:
        store.put(key, b"v")
    sent: list[str] = []
    faulty = FaultyStore(
        store,
        FaultPlan(**{**NONE.__dict__, "partial_delete": 1.0}),
        seed=3,
        before_delete=sent.extend,
    )
    outcome = faulty.delete_batch(keys)
    left = {o.key for o in store.list_objects("k")}
    assert outcome.failed and set(outcome.failed) == left
    assert set(outcome.deleted) == set(keys) - left
    assert sent == keys


def test_the_same_seed_draws_the_same_faults(store: S3ObjectStore) -> None:
    def draws(seed: int) -> list[bool]:
        faulty = FaultyStore(store, FaultPlan(error=0.5, slowdown=0, unknown_outcome=0), seed)
        out = []
        for i in range(30):
            try:
                faulty.put(f"s{i}", b"v")
                out.append(True)
            except RetriesExhaustedError:
                out.append(False)
        return out

    assert draws(7) == draws(7) and draws(7) != draws(8)


def test_switched_off_it_is_the_store(store: S3ObjectStore) -> None:
    faulty = FaultyStore(store, FaultPlan(error=1.0), seed=1)
    faulty.enabled = False
    faulty.put("k", b"v")
    assert [o.key for o in faulty.list_objects("k")] == ["k"]
    assert faulty.injected == {}
