"""One collection round, step by step, on the in-memory store: the requests
it makes under ``l0/`` and ``gc/`` and their order (computing ``M`` reads
``meta/``, which the watermark tests cover)."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from epochgc.events import EventChannel
from epochgc.gc.collection_round import CollectOutcome, CollectSettings, collect_once
from epochgc.gc.janitor import Janitor
from epochgc.gc.listing.knowledge import ShardFacts, ShardKnowledge
from epochgc.gc.listing.schedule import ListingPolicy
from epochgc.gc.sweeper import DeleteBatchDone
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.storage.keys import encode_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.controller import Controller

ROOT = "epochgc"
T0 = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
M = 20
POLICY = ListingPolicy(max_lag_seconds=3600)


class RecordingStore(MemoryStore):
    """Test helper: a ``MemoryStore`` that keeps every request in order."""

    def __init__(self) -> None:
        super().__init__(VirtualClock(T0))
        self.log: list[tuple[str, str]] = []

    def _count(self, operation: str, key: str) -> None:
        self.log.append((operation, key))
        super()._count(operation, key)

    def round_requests(self) -> list[str]:
        """The requests under ``l0/`` and ``gc/``, run ids elided."""
        seen: list[str] = []
        for operation, key in self.log:
            if key.startswith((f"{ROOT}/l0/", f"{ROOT}/gc/")):
                run_file = key.startswith(f"{ROOT}/gc/runs/")
                shown = f"{ROOT}/gc/runs/*/{key.split('/', 4)[4]}" if run_file else key
                seen.append(f"{operation} {shown}")
        return seen


def bucket() -> RecordingStore:
    """Two shards: shard 0 holds eligible keys (epochs 1, 2), shard 1 one
    key above ``M``."""
    store = RecordingStore()
    controller = Controller(store, ROOT)
    while controller.current_epoch() < M:
        controller.tick()
    for shard, epoch, n in [(0, 1, 1), (0, 2, 2), (1, M + 1, 3)]:
        store.put(encode_l0_key(ROOT, shard, epoch, str(uuid.UUID(int=n))), b"x")
    store.log.clear()
    return store


FIRST_LISTINGS = [
    f"GetObject {ROOT}/gc/shards/state",
    f"ListObjectsV2 {ROOT}/l0/",
    f"GetObject {ROOT}/gc/control.json",
    f"ListObjectsV2 {ROOT}/l0/000/",
    f"ListObjectsV2 {ROOT}/l0/001/",
]
"""A first round up to its first delete: the knowledge, the shards present,
the pause, then one listing per shard (with the guard on: the count)."""


def run(store: RecordingStore, max_fraction: float = 1.0, **kwargs: Any) -> CollectOutcome:
    settings = CollectSettings(
        timedelta(0), max_fraction, shard_concurrency=1, delete_concurrency=1, listing=POLICY
    )
    return collect_once(store, RequestStats(), ROOT, settings, now=T0, **kwargs)


def test_a_first_round_reads_the_knowledge_lists_every_shard_and_saves_what_it_learnt() -> None:
    store = bucket()
    outcome = run(store, writer="me")
    assert store.round_requests() == [
        *FIRST_LISTINGS,
        f"GetObject {ROOT}/gc/control.json",
        f"DeleteObjects {ROOT}/l0/000/000000000000000001/00000000-0000-0000-0000-000000000001",
        f"PutObject {ROOT}/gc/runs/*/deleted/part-00000.parquet",  # the keys it deleted
        f"PutObject {ROOT}/gc/shards/state",
        f"PutObject {ROOT}/gc/runs/*/summary.json",
    ]
    assert outcome.summary.deleted == 2 and outcome.summary.success
    assert outcome.knowledge is not None and outcome.knowledge.written_by == "me"
    assert set(outcome.knowledge.shards) == {0, 1} and outcome.summary.shards.full_sweep


def test_a_round_sweeps_on_the_channel_it_is_given() -> None:
    """The channel the store publishes ``Throttled`` on is the round's
    sweeper's: its deletions are published there (and its rate control
    listens there, ``tests/integration/test_sweeper.py``)."""
    store = bucket()
    events = EventChannel()
    deleted: list[str] = []
    events.subscribe(DeleteBatchDone, lambda e: deleted.extend(o.key for o in e.deleted))
    outcome = run(store, events=events)
    assert outcome.summary.deleted == 2
    assert sorted(deleted) == [encode_l0_key(ROOT, 0, e, str(uuid.UUID(int=e))) for e in (1, 2)]


def test_with_nothing_due_a_round_lists_nothing_and_writes_only_its_summary() -> None:
    store = bucket()
    quiet = ShardKnowledge(
        {0: ShardFacts(T0, M, M + 1), 1: ShardFacts(T0, M, M + 1)},
        full_sweep_at=T0,
        discovered_at=T0,
    )
    outcome = run(store, knowledge=quiet)
    assert store.round_requests() == [
        f"GetObject {ROOT}/gc/control.json",
        f"PutObject {ROOT}/gc/runs/*/summary.json",
    ]
    assert outcome.summary.shards.present is None and outcome.summary.shards.listed == 0
    assert outcome.knowledge is not None and outcome.knowledge.shards[0].quiet_at == T0, (
        "the quiet marks go to the next round in memory, not to the bucket"
    )
    assert outcome.next_listing_at is not None


def test_the_guard_stops_a_round_before_it_deletes_learns_or_cleans() -> None:
    store = bucket()
    outcome = run(store, max_fraction=0.1, janitor=Janitor(store, ROOT))
    assert store.round_requests() == [
        *FIRST_LISTINGS,
        f"PutObject {ROOT}/gc/runs/*/summary.json",
    ]
    assert outcome.stopped_by_guard is not None and not outcome.summary.success
    assert outcome.knowledge == ShardKnowledge(), "nothing learnt"


def test_a_stopped_round_learns_nothing_and_leaves_the_janitor_due() -> None:
    store = bucket()
    stop = threading.Event()
    stop.set()
    outcome = run(store, stop=stop, janitor=Janitor(store, ROOT))
    assert f"PutObject {ROOT}/gc/shards/state" not in store.round_requests()
    assert not any(r.startswith("DeleteObjects") for r in store.round_requests())
    assert outcome.knowledge == ShardKnowledge()
    assert not outcome.summary.janitor.complete


def test_a_dry_run_lists_every_shard_and_writes_its_plan_not_the_knowledge() -> None:
    store = bucket()
    outcome = run(store, dry_run=True)
    assert store.round_requests() == [
        f"ListObjectsV2 {ROOT}/l0/",
        f"ListObjectsV2 {ROOT}/l0/000/",
        f"ListObjectsV2 {ROOT}/l0/001/",
        f"PutObject {ROOT}/gc/runs/*/plan.parquet",
        f"PutObject {ROOT}/gc/runs/*/summary.json",
    ]
    assert outcome.plan_key is not None and outcome.summary.eligible == 2
    assert outcome.summary.deleted == 0 and outcome.knowledge is None
