"""The controller log and cluster epoch on the embedded S3."""

from __future__ import annotations

import threading

import pytest

from epochgc.errors import (
    InvalidArgumentError,
    MalformedRecordError,
    TopicExistsError,
    TopicNotFoundError,
    TransientStorageError,
)
from epochgc.events import EventChannel
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import (
    SNAPSHOT_CHUNK,
    Controller,
    EpochAdvanceStarted,
    EpochTicked,
)
from epochgc.watermarks.epoch import EpochCache
from epochgc.watermarks.partition.replica import PartitionReplica
from tests.support.wrapping import StoreWrapper

ROOT = "epochgc"


def test_epoch_is_the_newest_controller_offset(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    assert controller.current_epoch() == 0, "epoch 0 means before anything"
    assert controller.tick() == 1
    assert controller.tick() == 2
    assert Controller(store, ROOT).current_epoch() == 2


def test_create_topic_sets_revision_and_partition_state(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    orders = controller.create_topic("orders", 3, {"retention.local.target.ms": 60000})
    assert orders.revision == 2
    assert controller.current_epoch() == 2
    view = controller.snapshot()
    assert view.offset == 2 and set(view.topics) == {"orders"}
    assert view.topics["orders"].config == {"retention.local.target.ms": 60000}
    for partition in range(3):
        state = PartitionReplica(store, ROOT, orders.partition_id(partition)).open()
        assert (state.max_applied_epoch, state.previous_applied_epoch) == (2, 2)
        assert state.min_epoch_lower_bound == 2 and state.safe_epoch == 1


@pytest.mark.parametrize("name", ["", "a/b", ".", "..", "x" * 250, "sp ace"])
def test_invalid_topic_names_are_rejected(store: S3ObjectStore, name: str) -> None:
    with pytest.raises(ValueError, match="invalid topic name"):
        Controller(store, ROOT).create_topic(name, 1)


def test_partition_count_must_be_positive(store: S3ObjectStore) -> None:
    with pytest.raises(ValueError, match="partitions"):
        Controller(store, ROOT).create_topic("t", 0)


def test_duplicate_names_are_rejected(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.create_topic("orders", 1)
    with pytest.raises(TopicExistsError):
        controller.create_topic("orders", 2)
    with pytest.raises(TopicExistsError):
        Controller(store, ROOT).create_topic("orders", 2)


def test_concurrent_creators_of_one_name_one_wins(store: S3ObjectStore) -> None:
    results: dict[int, str] = {}
    barrier = threading.Barrier(4)

    def create(i: int) -> None:
        controller = Controller(store, ROOT)
        barrier.wait()
        try:
            controller.create_topic("orders", 1 + i)
            results[i] = "created"
        except TopicExistsError:
            results[i] = "exists"

    threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == ["created", "exists", "exists", "exists"]
    winner = next(i for i, r in results.items() if r == "created")
    assert Controller(store, ROOT).topic("orders").partitions == 1 + winner


def test_delete_topic(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.create_topic("orders", 1)
    controller.delete_topic("orders")
    assert controller.snapshot().topics == {}
    with pytest.raises(TopicNotFoundError):
        controller.delete_topic("orders")
    again = controller.create_topic("orders", 2)
    assert again.revision == 3, "a re-created topic gets a new revision"


def test_an_unreadable_entry_stops_the_snapshot(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    store.put_if_absent(f"{ROOT}/meta/controller/{2:020d}", b'{"v": 1, "type": "mystery"}')
    with pytest.raises(MalformedRecordError):
        Controller(store, ROOT).snapshot()


def test_epoch_cache_over_the_controller(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    cache = EpochCache(controller.current_epoch, ttl_seconds=3600)
    assert cache.get() == 1
    controller.tick()
    assert cache.get() == 1, "cached"
    cache.invalidate(below=2)
    assert cache.get() == 2


def test_guarded_epoch_advance(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    assert controller.advance_to(5) == 5
    with pytest.raises(InvalidArgumentError, match="already 5"):
        controller.advance_to(5)
    with pytest.raises(InvalidArgumentError, match="already 5"):
        controller.advance_to(3)
    with pytest.raises(InvalidArgumentError, match="more than 10"):
        controller.advance_to(100, max_steps=10)
    assert controller.current_epoch() == 5


class _FailingGets(StoreWrapper):
    """The store, with GetObject failing for chosen controller offsets."""

    def __init__(self, store: S3ObjectStore, failing: set[int]) -> None:
        super().__init__(store)
        self.failing = failing
        self.gets: list[str] = []

    def get(self, key: str, **kwargs: object) -> object:
        self.gets.append(key)
        name = key.rsplit("/", 1)[1]
        if name.isdigit() and int(name) in self.failing:
            raise TransientStorageError(f"injected: GetObject {key}")
        return self._store.get(key, **kwargs)  # type: ignore[arg-type]


def test_epoch_advance_reports_its_start_and_every_tick(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    heard: list[tuple[str, int]] = []
    events = EventChannel()
    events.subscribe(EpochAdvanceStarted, lambda e: heard.append(("start", e.current)))
    events.subscribe(EpochTicked, lambda e: heard.append(("tick", e.epoch)))
    controller.advance_to(4, events=events)
    assert heard == [("start", 1), ("tick", 2), ("tick", 3), ("tick", 4)]
    with pytest.raises(InvalidArgumentError):
        controller.advance_to(4, events=events)
    assert heard[-1] == ("tick", 4), "a refused advance announces nothing"


def test_a_failed_read_keeps_the_chunks_already_folded(store: S3ObjectStore) -> None:
    """A process starting on a long log under a flaky store resumes where
    its failed attempt stopped, instead of reading everything again."""
    writer = Controller(store, ROOT)
    writer.create_topic("orders", 1)
    writer.advance_to(SNAPSHOT_CHUNK * 2 + 10)
    flaky = _FailingGets(store, failing={SNAPSHOT_CHUNK * 2 - 1})
    reader = Controller(flaky, ROOT)  # type: ignore[arg-type]
    with pytest.raises(TransientStorageError):
        reader.snapshot()
    flaky.failing.clear()
    flaky.gets.clear()
    view = reader.snapshot()
    assert view.offset == SNAPSHOT_CHUNK * 2 + 10 and set(view.topics) == {"orders"}
    # Offsets start at 1: the first chunk (1..64) was kept; the second
    # chunk (the one that failed) and the rest are read again.
    assert len(flaky.gets) == view.offset - SNAPSHOT_CHUNK
