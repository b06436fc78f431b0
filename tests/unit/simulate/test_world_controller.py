"""What the simulated world makes of controller writes that land: a topic
entry goes to the topic ghost, and one that lands in a slot a stored
snapshot covers (a late write into a slot compaction truncated) counts
for nothing, neither as a topic entry nor as an epoch tick; and two
holders of a deleted incarnation's partition are not two owners."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import cast

from epochgc.simulate.cluster import ROOT, ClusterSettings, SimNode, World
from epochgc.simulate.simulated_store import Network
from epochgc.simulate.virtual_time import Scheduler
from epochgc.storage.keys import PartitionId, controller_log_prefix, controller_snapshot_key
from epochgc.storage.keys import encode_log_entry_key as entry_key
from epochgc.watermarks.controller import ControllerView, EpochStarts, snapshot_of
from epochgc.watermarks.controller_codec import (
    DeleteTopic,
    EpochTick,
    encode_controller_entry,
    encode_controller_snapshot,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PARTITIONS = (PartitionId("orders", 1, 0), PartitionId("clicks", 2, 0))


def world() -> World:
    sched = Scheduler(random.Random(1))
    network = Network(sched, random.Random(1), [], [0.0], lambda _line: None)
    return World(sched, network, random.Random(1), ClusterSettings(PARTITIONS), lambda _l: None)


def land(w: World, offset: int, body: bytes) -> None:
    key = entry_key(controller_log_prefix(ROOT), offset)
    w.network.bucket.put(key, body)
    w.landed(key, body, "node-1#1")


def test_the_topics_created_before_the_run_are_live_in_the_ghost() -> None:
    w = world()
    assert w.topics.live == {"orders": ("orders", 1), "clicks": ("clicks", 2)}
    assert w.topics.live_partitions() == [PartitionId("clicks", 2, 0), PartitionId("orders", 1, 0)]


def test_a_delete_landing_in_a_truncated_slot_ends_nothing() -> None:
    w = world()
    for offset in (3, 4):  # in the bucket, as the reader the ghost checks sees them
        w.network.bucket.put(
            entry_key(controller_log_prefix(ROOT), offset), encode_controller_entry(EpochTick(T0))
        )
    snapshot = snapshot_of(ControllerView(4, {}), EpochStarts(10))
    w.landed(controller_snapshot_key(ROOT), encode_controller_snapshot(snapshot), "collector")
    assert w.controller_covered == 4
    # A late write into slot 4, freed by the truncation: no reader folds it.
    w.landed(entry_key(controller_log_prefix(ROOT), 4), _delete("orders", 1), "topic-racer-1")
    assert w.topics.live["orders"] == ("orders", 1)
    # The same entry in a slot above the snapshot counts.
    w.network.bucket.put(entry_key(controller_log_prefix(ROOT), 5), _delete("orders", 1))
    w.landed(entry_key(controller_log_prefix(ROOT), 5), _delete("orders", 1), "topic-racer-1")
    assert "orders" not in w.topics.live


def test_a_tick_landing_in_a_truncated_slot_is_no_tick() -> None:
    w = world()
    snapshot = snapshot_of(ControllerView(4, {}), EpochStarts(10))
    w.landed(controller_snapshot_key(ROOT), encode_controller_snapshot(snapshot), "collector")
    w.landed(entry_key(controller_log_prefix(ROOT), 3), encode_controller_entry(EpochTick(T0)), "a")
    # Had the void tick counted, this one, sent at the same instant, would be too close.
    land(w, 5, encode_controller_entry(EpochTick(T0)))


def _delete(topic: str, revision: int) -> bytes:
    return encode_controller_entry(DeleteTopic(topic, T0, revision))


def _holder(name: str) -> SimNode:
    return cast(SimNode, SimpleNamespace(process=SimpleNamespace(name=name)))


def test_two_holders_of_a_deleted_incarnations_partition_are_not_two_owners() -> None:
    """Seen in seed 164 with two producers: the janitor removed the records
    of orders@1 just deleted, and a node whose controller reads landed late
    took orders/0@1 again while its holder had not yet read the delete."""
    w = world()
    orders, clicks = PARTITIONS
    both = [(_holder("node-1#1"), frozenset({orders})), (_holder("node-2#2"), frozenset({orders}))]
    assert w.two_owners(both) == f"{orders} is owned by node-1#1 and node-2#2 at once"
    land(w, 3, _delete("orders", 1))
    assert w.two_owners(both) is None
    live = [(node, owned | {clicks}) for node, owned in both]
    assert w.two_owners(live) == f"{clicks} is owned by node-1#1 and node-2#2 at once"
