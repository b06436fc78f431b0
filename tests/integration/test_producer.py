"""The producer and leader service: failover replays and stale epochs."""

from __future__ import annotations

import asyncio
import time

import pytest

from epochgc.errors import TopicNotFoundError, TransientStorageError
from epochgc.ingest.producer import Producer
from epochgc.reconciler.reader import PartitionReader
from epochgc.storage.keys import PartitionId, parse_l0_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.epoch import EpochCache
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.partition.leader import PartitionLeaderService
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.partition.term_writer import TermWriter
from tests.support.faults import HookedStore
from tests.support.nodes import producer_for

ROOT = "epochgc"
ORDERS0 = PartitionId("orders", 1, 0)  # the first controller entry: revision 1
LOG_PREFIX = f"{ROOT}/meta/partitions/orders/1/0/log/"


async def start_service(
    store: object, term: int, directory: LeaderDirectory, pid: PartitionId = ORDERS0
) -> PartitionLeaderService:
    replica = PartitionReplica(store, ROOT, pid)  # type: ignore[arg-type]
    await asyncio.to_thread(replica.open)
    leader = TermWriter(replica, term, depth=8)
    await asyncio.to_thread(leader.start)
    service = PartitionLeaderService(leader)
    service.start()
    await directory.register(service)
    return service


def test_a_pipeline_cut_by_a_leader_failure_is_replayed_in_order(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.create_topic("orders", 1)
    appends = {"count": 0, "down": False}

    def slow_then_down(key: str, _body: bytes) -> None:
        if not key.startswith(LOG_PREFIX):
            return
        appends["count"] += 1
        time.sleep(0.03)  # a slow store: several chunks end up in flight
        if appends["count"] > 3:
            appends["down"] = True
        if appends["down"]:
            raise TransientStorageError("injected: the old leader's store path is down")

    async def scenario() -> tuple[list[int], Producer, PartitionLeaderService]:
        directory = LeaderDirectory()
        old = await start_service(HookedStore(store, before_create=slow_then_down), 1, directory)
        producer = producer_for(
            store,
            ROOT,
            directory,
            controller,
            revision_of=lambda _t: 1,
            epoch_ttl_seconds=60,
            linger_seconds=0.001,
            depth=8,
        )
        calls = []
        for i in range(8):
            calls.append(asyncio.create_task(producer.produce("orders", 0, [f"r{i}".encode()])))
            await asyncio.sleep(0.005)
        while old.is_open:
            await asyncio.sleep(0.01)
        assert not any(c.done() for c in calls[3:]), "the cut tail is not acknowledged"
        new = await start_service(store, 2, directory)
        offsets = [o for call in calls for o in await call]
        await producer.close()
        await new.stop()
        return offsets, producer, old

    offsets, producer, old = asyncio.run(scenario())
    assert offsets == sorted(offsets) and len(set(offsets)) == 8, "produce order kept"
    assert producer.stats.replays >= 1
    assert old.stats.failed >= 1
    rows = PartitionReader(store, ROOT).read("orders", 0)
    assert [r for _, r in rows] == [f"r{i}".encode() for i in range(8)]
    assert [o for o, _ in rows] == offsets


def test_a_stale_epoch_is_refreshed_and_leaves_an_orphan(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.create_topic("orders", 1)  # revision 1

    async def scenario() -> Producer:
        directory = LeaderDirectory()
        service = await start_service(store, 1, directory)
        epochs = EpochCache(controller.current_epoch, ttl_seconds=3600)
        assert epochs.get() == 1  # cached, and about to go stale
        for _ in range(3):
            epoch = await asyncio.to_thread(controller.tick)
            await service.advance_epoch(epoch)  # window [3, 4]
        producer = Producer(
            store, ROOT, directory, epochs, lambda _t: 1, shards=4, linger_seconds=0.001
        )
        assert await producer.produce("orders", 0, [b"late"]) == [0]
        await producer.close()
        await service.stop()
        return producer

    producer = asyncio.run(scenario())
    assert producer.stats.stale_epoch_retries == 1
    assert producer.stats.orphaned_uploads == 1
    epochs = sorted(
        parsed.epoch
        for info in store.list_objects(f"{ROOT}/l0/")
        if (parsed := parse_l0_key(info.key, ROOT)) is not None
    )
    assert epochs == [1, 4], "the orphan at the stale epoch, the accepted one at the fresh"
    assert PartitionReader(store, ROOT).read("orders", 0) == [(0, b"late")]


def test_a_chunk_of_a_deleted_incarnation_fails_instead_of_moving(store: S3ObjectStore) -> None:
    """Leaders are found by name; a chunk waiting for one while its topic is
    deleted and created again must not land in the new incarnation (found
    by ``epochgc verify``: such records were acknowledged at the new
    topic's offsets, under the old one's revision)."""
    controller = Controller(store, ROOT)
    first = controller.create_topic("orders", 1)

    async def scenario() -> tuple[PartitionId, list[int]]:
        directory = LeaderDirectory()  # no leader yet: the chunk waits for one
        producer = producer_for(store, ROOT, directory, controller, linger_seconds=0.001)
        waiting = asyncio.create_task(producer.produce("orders", 0, [b"old"]))
        while not list(store.list_objects(f"{ROOT}/l0/")):
            await asyncio.sleep(0.01)  # uploaded, bound to the first incarnation
        await asyncio.to_thread(controller.delete_topic, "orders")
        second = (await asyncio.to_thread(controller.create_topic, "orders", 1)).partition_id(0)
        service = await start_service(store, 1, directory, second)
        with pytest.raises(TopicNotFoundError):
            await waiting
        offsets = await producer.produce("orders", 0, [b"new"])
        await producer.close()
        await service.stop()
        return second, offsets

    second, offsets = asyncio.run(scenario())
    assert second.revision > first.revision
    assert offsets == [0], "the new incarnation starts at 0, with nothing of the old"
    assert PartitionReader(store, ROOT).read_partition(second, 0) == [(0, b"new")]
