"""Nodes that start together share the partitions from their first plan:
a node that has just taken its node lease waits one ownership interval
before it takes anything, so the peers starting with it register first."""

from __future__ import annotations

import asyncio

from epochgc.leases.timing import LeasePolicy
from epochgc.ownership.assignment import desired_assignment
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.reconciler.node import ReconcilerNode
from epochgc.reconciler.node_settings import NodeSettings
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.directory import LeaderDirectory
from tests.support.nodes import reconciler_node

ROOT = "epochgc"
POLICY = LeasePolicy(ttl_seconds=15.0, renew_interval_seconds=5.0, skew_margin_seconds=2.0)
SETTINGS = NodeSettings(
    idle_interval_seconds=1e9, report_interval_seconds=1e9, ownership_interval_seconds=5.0
)


def _node(
    store: ObjectStore,
    name: str,
    settings: NodeSettings = SETTINGS,
    clock: VirtualClock | None = None,
) -> tuple[ReconcilerNode, NodeOwnership]:
    """A node on ``clock`` (real time without one)."""
    clocks = {} if clock is None else {"now": clock.now, "monotonic": clock.monotonic}
    return reconciler_node(
        store, ROOT, name, LeaderDirectory(), settings=settings, policy=POLICY, **clocks
    )


def test_the_first_node_up_does_not_take_what_its_peers_will_own() -> None:
    # Seen in bench_ownership's real half: 20 nodes started moments apart;
    # each took up to max_moves partitions in the round it took its lease,
    # seeing few peers, then handed most of them back, so the cluster
    # churned for a minute before every partition had an owner.
    asyncio.run(_start_together())


async def _start_together() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    topic = Controller(store, ROOT).create_topic("orders", 30)
    a, a_owns = _node(store, "node-a", clock=clock)
    b, b_owns = _node(store, "node-b", clock=clock)
    await a.run_round()  # takes its node lease
    assert a_owns.lease.is_valid()
    assert a_owns.owned() == frozenset(), "a node takes nothing in the round it registers"
    clock.advance(1.0)
    await b.run_round()  # registers a moment later
    assert b_owns.owned() == frozenset()
    clock.advance(4.0)  # one ownership interval after a registered
    await a.run_round()
    want = desired_assignment(["node-a", "node-b"], topic.partition_ids())
    assert a_owns.owned() == {p for p, n in want.items() if n == "node-a"}
    await a.run_round()
    clock.advance(1.0)
    await b.run_round()
    assert b_owns.owned() == {p for p, n in want.items() if n == "node-b"}
    assert a_owns.totals["handed_back"] == b_owns.totals["handed_back"] == 0
    await a.stop()
    await b.stop()


def test_rounds_driven_one_by_one_without_an_interval_plan_at_once() -> None:
    # ownership_interval_seconds = 0 (rounds driven by the caller): the wait
    # is zero rounds, as before.
    asyncio.run(_no_interval())


async def _no_interval() -> None:
    clock = VirtualClock()
    store = MemoryStore(clock)
    Controller(store, ROOT).create_topic("orders", 4)
    node, owns = _node(
        store,
        "node-a",
        NodeSettings(idle_interval_seconds=1e9, report_interval_seconds=1e9),
        clock,
    )
    await node.run_round()
    assert len(owns.owned()) == 4
    assert len(node.led_partitions()) == 4
    await node.stop()


def test_the_ownership_loop_waits_an_interval_after_the_lease_too() -> None:
    # ``run`` drives ownership from a task of its own; its first round after
    # taking the lease must wait as well.
    asyncio.run(_loop())


async def _loop() -> None:
    store = MemoryStore(VirtualClock())  # the loop keeps real time; the store's clock is unused
    Controller(store, ROOT).create_topic("orders", 8)
    node, owns = _node(
        store,
        "node-a",
        NodeSettings(
            idle_interval_seconds=1e9, report_interval_seconds=1e9, ownership_interval_seconds=0.5
        ),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(node.run(stop, round_interval_seconds=0.05))
    try:
        for _ in range(400):
            if owns.lease.is_valid():
                break
            await asyncio.sleep(0.005)
        assert owns.lease.is_valid()
        registered = asyncio.get_running_loop().time()
        while asyncio.get_running_loop().time() - registered < 0.25:
            assert owns.owned() == frozenset(), "took partitions in the round it registered"
            await asyncio.sleep(0.01)
        for _ in range(300):
            if len(owns.owned()) == 8:
                break
            await asyncio.sleep(0.01)
        assert len(owns.owned()) == 8
    finally:
        stop.set()
        await task
