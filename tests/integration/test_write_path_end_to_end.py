"""End to end on the embedded S3: 3 topics x 4 partitions, two producers,
two reconciler nodes, a node crash in the middle, then quiesce and verify."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from epochgc.ingest.producer import Producer
from epochgc.reconciler.node import ReconcilerNode
from epochgc.reconciler.reader import PartitionReader
from epochgc.storage.keys import parse_l0_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.epoch import EpochCache
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.safe_epoch.reports import read_reports
from tests.support.nodes import (
    QUICK_POLICY,
    crash,
    eager_settings,
    publish_report_now,
    reconciler_node,
)

ROOT = "epochgc"
TOPICS = ["orders", "clicks", "views"]
PARTITIONS = 4
SETTINGS = eager_settings(snapshot_every_entries=20)


async def produce_some(
    tick: Callable[[], int],
    producer: Producer,
    name: str,
    count: int,
    acked: dict[tuple[str, int], dict[int, bytes]],
    rng: random.Random,
) -> None:
    async def one(i: int) -> None:
        topic = rng.choice(TOPICS)
        partition = rng.randrange(PARTITIONS)
        record = f"{name}-{i}".encode()
        [offset] = await producer.produce(topic, partition, [record])
        acked.setdefault((topic, partition), {})[offset] = record

    # Waves of ten concurrent produce calls, the epoch ticking between some:
    # many L0 objects, window slides, producers whose cached epoch lags.
    for wave in range(0, count, 10):
        await asyncio.gather(*(one(i) for i in range(wave, wave + 10)))
        if rng.random() < 0.5:
            await asyncio.to_thread(tick)


def _quiesced(node: ReconcilerNode, last_epoch_written: int) -> bool:
    led = node.leadership.led
    if len(led) != len(TOPICS) * PARTITIONS:
        return False
    states = [entry.service.leader.replica.state for entry in led.values()]
    return all(s.is_fully_reconciled and s.safe_epoch >= last_epoch_written - 1 for s in states)


def test_acknowledged_records_survive_a_node_crash_and_m_advances(store: S3ObjectStore) -> None:
    asyncio.run(_scenario(store))


async def _scenario(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    for topic in TOPICS:
        controller.create_topic(topic, PARTITIONS)
    revisions = {t: controller.topic(t).revision for t in TOPICS}
    directory = LeaderDirectory()
    node_a, leases_a = reconciler_node(
        store, ROOT, "node-a", directory, settings=SETTINGS, policy=QUICK_POLICY
    )
    node_b, leases_b = reconciler_node(
        store, ROOT, "node-b", directory, settings=SETTINGS, policy=QUICK_POLICY
    )
    leases_a.start()
    leases_b.start()
    try:
        await node_a.run_round()
        await node_b.run_round()
        assert len(node_a.led_partitions()) == 12 and node_b.led_partitions() == []

        epochs = EpochCache(controller.current_epoch, ttl_seconds=0.2)
        producers = [
            Producer(
                store,
                ROOT,
                directory,
                epochs,
                revisions.__getitem__,
                shards=16,
                linger_seconds=0.02,
            )
            for _ in range(2)
        ]
        acked: dict[tuple[str, int], dict[int, bytes]] = {}
        rng = random.Random(4)

        await asyncio.gather(
            produce_some(controller.tick, producers[0], "p0a", 60, acked, rng),
            produce_some(controller.tick, producers[1], "p1a", 60, acked, rng),
        )
        await asyncio.to_thread(controller.tick)
        await node_a.run_round()  # reconcile some, publish a report

        # node-a dies without releasing its leases; producers keep going and
        # wait for the failover.
        await crash(node_a, directory)
        leases_a.stop(release=False)
        writes = asyncio.gather(
            produce_some(controller.tick, producers[0], "p0b", 60, acked, rng),
            produce_some(controller.tick, producers[1], "p1b", 60, acked, rng),
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while len(node_b.led_partitions()) < 12:
            assert loop.time() < deadline, "failover did not happen within the TTL"
            await node_b.run_round()
            await asyncio.sleep(0.2)
        await writes
        last_epoch_written = await asyncio.to_thread(controller.current_epoch)

        # Quiesce: flush, tick twice, let node-b reconcile and housekeep.
        for producer in producers:
            await producer.close()
        for _ in range(2):
            await asyncio.to_thread(controller.tick)
            for _ in range(3):
                await node_b.run_round()
        # Until every partition is led, fully reconciled and M(p) caught up
        # (a lease lost to a starved heartbeat is re-taken in a later round).
        deadline = loop.time() + 30
        while not _quiesced(node_b, last_epoch_written):
            assert loop.time() < deadline, f"no quiesce: {node_b.stats}"
            await node_b.run_round()
        await publish_report_now(node_b)
    finally:
        await node_b.stop()
        leases_b.stop()

    total = sum(len(v) for v in acked.values())
    assert total == 240
    assert node_b.stats.leaderships == 12
    assert node_b.stats.housekeeping_advances > 0
    assert node_a.stats.records_reconciled + node_b.stats.records_reconciled >= 240
    print(  # shown with -s: what the failover cost the producers
        "producer stats:", [p.stats for p in producers], "node-b:", node_b.stats
    )
    reader = PartitionReader(store, ROOT)
    for topic in TOPICS:
        for partition in range(PARTITIONS):
            rows = await asyncio.to_thread(reader.read, topic, partition)
            offsets = [o for o, _ in rows]
            assert offsets == list(range(len(rows))), "no gaps"
            records = [r for _, r in rows]
            assert len(set(records)) == len(records), "no duplicates"
            want = acked.get((topic, partition), {})
            assert dict(rows) == want, f"{topic}/{partition}: acknowledged records read back"

    reports, skipped = read_reports(store, ROOT)
    assert skipped == []
    by_partition = {
        (p.topic, p.partition): p for r in reports if r.node == "node-b" for p in r.partitions
    }
    assert len(by_partition) == 12
    for report in by_partition.values():
        assert report.safe_epoch >= last_epoch_written - 1, report
    l0_epochs = {
        parsed.epoch
        for info in store.list_objects(f"{ROOT}/l0/")
        if (parsed := parse_l0_key(info.key, ROOT)) is not None
    }
    assert max(l0_epochs) <= last_epoch_written
