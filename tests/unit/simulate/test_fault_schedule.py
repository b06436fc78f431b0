"""The simulation's fault schedule: drawn from the seed alone, every fault
over before the heal, and the paired ``late_then_cut`` faults shaped as the
run they stand for needs them (``simulate/fault_schedule.py``)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.errors import PreconditionFailedError, RetriesExhaustedError
from epochgc.simulate.collector_ghost import COLLECTOR
from epochgc.simulate.fault_schedule import Fault, draw_schedule, throttled_prefixes
from epochgc.simulate.simulated_store import Network, StoreView
from epochgc.simulate.virtual_time import Process, Scheduler
from epochgc.storage.keys import controller_log_prefix

NODES = ["node-1", "node-2", "node-3"]
UNTIL = 300.0
TTL = 15.0
OWNERS = "epochgc/meta/owners/"


def _draw(seed: int) -> list[Fault]:
    return draw_schedule(random.Random(seed), NODES, ["node-4"], UNTIL, TTL, root="epochgc")


@given(st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_a_schedule_is_its_seed_and_ends_before_the_heal(seed: int) -> None:
    faults = _draw(seed)
    assert faults == _draw(seed)
    racers = {f.target for f in faults if f.kind == "topic_race"}
    for fault in faults:
        assert fault.at >= 0.0 and fault.at + fault.seconds <= UNTIL, fault.describe()
        assert fault.target in ("", *NODES, "node-4", COLLECTOR, *racers), fault.describe()
        if fault.kind == "topic_race":
            # The racer's writes, and only its writes, land late meanwhile.
            late = [
                f
                for f in faults
                if f.kind == "late_landing" and f.target == fault.target and f.at == fault.at
            ]
            assert [f.writes_only for f in late] == [True], fault.describe()
            assert 1 <= fault.count <= 4


def _pairs(faults: list[Fault]) -> list[tuple[Fault, Fault]]:
    """Each fixed-delay late landing with the cut drawn right after it."""
    pairs = []
    for late in (f for f in faults if f.kind == "late_landing" and f.late_by and not f.writes_only):
        end = late.at + late.seconds
        cuts = [
            f for f in faults if f.kind == "brownout" and f.rate == 1.0 and end - 2.0 <= f.at <= end
        ]
        assert cuts, f"no cut beside {late.describe()}"
        pairs.append((late, cuts[0]))
    return pairs


def test_late_then_cut_lands_one_nodes_writes_late_then_cuts_off_another() -> None:
    pairs = [pair for seed in range(1, 201) for pair in _pairs(_draw(seed))]
    assert len(pairs) > 100, "late_then_cut should be in most seeds"
    for late, cut in pairs:
        assert 3.0 <= late.late_by <= 5.0
        assert late.target and cut.target and late.target != cut.target
        # The cut outlasts a TTL: the peer's grant runs out while it is
        # cut off, and the judge's take-over writes come after its late
        # window has ended.
        assert cut.seconds >= TTL
        assert cut.at + cut.seconds <= UNTIL


def test_lossy_rebalance_loses_answers_while_a_restarted_nodes_partitions_move() -> None:
    shapes = 0
    for seed in range(1, 201):
        faults = _draw(seed)
        quick_restarts = [f for f in faults if f.kind == "crash" and f.seconds <= 3.0]
        for spell in (f for f in faults if f.kind == "lost_answers"):
            crash = next(
                (c for c in quick_restarts if abs(c.at + TTL - 2.0 - spell.at) < 1e-9), None
            )
            if crash is None:
                continue
            # Killed and restarted at once: it joins again a TTL later, about
            # when the others take its partitions; the spell covers both,
            # and is shorter than a lease survives unrenewed.
            assert 0.5 <= crash.seconds <= 3.0 and crash.target in NODES
            assert 8.0 <= spell.seconds <= 14.0 < TTL and spell.rate in (0.6, 0.9)
            assert not spell.target, "everyone's writes: any taker's raise"
            assert spell.at + spell.seconds + TTL <= UNTIL
            shapes += 1
    assert shapes > 100, "lossy_rebalance should be in most seeds"


def test_lossy_restart_loses_ownership_answers_while_a_node_restarts_cleanly() -> None:
    restarts = 0
    for seed in range(1, 201):
        faults = _draw(seed)
        spells = [f for f in faults if f.kind == "lost_answers" and f.prefix]
        for restart in (f for f in faults if f.kind == "restart"):
            spell = next(s for s in spells if abs(s.at + 1.0 - restart.at) < 1e-9)
            # Down for less than a round or two; the spell covers the
            # release, the takes and the return, and only ownership writes.
            assert restart.target in NODES and 2.0 <= restart.seconds <= 8.0
            assert spell.prefix == OWNERS and not spell.target
            assert spell.rate in (0.6, 0.9) and spell.retried == 1.0
            assert spell.at + spell.seconds >= restart.at + restart.seconds + 5.0
            assert restart.at + 90.0 <= UNTIL
            restarts += 1
        assert len(spells) == sum(f.kind == "restart" for f in faults)
    assert restarts >= 200, "lossy_restart should be in every seed"


def test_lost_answers_under_a_prefix_spare_other_keys_and_come_back_as_412() -> None:
    sched = Scheduler(random.Random(3))
    everyone = Fault("lost_answers", 0.0, 100.0, rate=0.1)
    owners = Fault("lost_answers", 0.0, 100.0, rate=1.0, retried=1.0, prefix=OWNERS)
    network = Network(sched, random.Random(3), [everyone, owners], [0.0], lambda _line: None)
    view = StoreView(network, "node-1", Process("node-1"))
    outcomes: list[str] = []

    def requests() -> None:
        for key in (f"{OWNERS}clicks/1/0", "epochgc/meta/nodes/node-1") * 5:
            try:
                view.put_if_absent(key, b"x")
                outcomes.append(f"{key}: ok")
            except PreconditionFailedError:
                outcomes.append(f"{key}: 412")
            except RetriesExhaustedError:
                outcomes.append(f"{key}: timed out")
            network.bucket.delete(key)

    sched.spawn(Process("node-1"), "requests", requests)
    sched.run_until(50.0)
    owner_outcomes = {o for o in outcomes if o.startswith(OWNERS)}
    assert owner_outcomes == {f"{OWNERS}clicks/1/0: 412"}, "landed, every answer lost"
    assert "epochgc/meta/nodes/node-1: ok" in outcomes, "other keys: the 10% fault"


def test_a_slowdown_throttles_one_hot_prefix_for_a_while() -> None:
    slowdowns = [f for seed in range(1, 201) for f in _draw(seed) if f.kind == "slowdown"]
    assert len(slowdowns) > 100, "slowdown should be in most seeds"
    assert {f.prefix for f in slowdowns} == set(throttled_prefixes("epochgc"))
    for slowdown in slowdowns:
        assert not slowdown.target, "every process's requests to the prefix"
        assert slowdown.rate in (2.0, 5.0, 10.0)
        assert 10.0 <= slowdown.seconds <= 60.0 and slowdown.at + slowdown.seconds <= UNTIL


def test_a_throttled_prefix_passes_its_rate_retries_the_rest_and_spares_other_keys() -> None:
    sched = Scheduler(random.Random(3))
    slowdown = Fault("slowdown", 0.0, 100.0, rate=2.0, prefix="epochgc/l0/")
    network = Network(sched, random.Random(3), [slowdown], [0.0], lambda _line: None)
    outcomes: list[tuple[str, str, float, float]] = []
    """(key, outcome, how long it took, when it was answered)"""

    def burst(name: str, key: str) -> None:
        proc = Process(name)

        def requests() -> None:
            for _ in range(5):
                sent = sched.now
                try:
                    network.call(name, proc, "GetObject", key, lambda: None, write=False)
                    outcomes.append((key, "ok", sched.now - sent, sched.now))
                except RetriesExhaustedError:
                    outcomes.append((key, "ran out", sched.now - sent, sched.now))

        sched.spawn(proc, name, requests)

    for number in range(4):
        burst(f"collector-{number}", f"epochgc/l0/00{number}/k")
    burst("node-1", "epochgc/meta/nodes/node-1")
    sched.run_until(50.0)
    throttled = [o for o in outcomes if o[0].startswith("epochgc/l0/")]
    spared = [o for o in outcomes if not o[0].startswith("epochgc/l0/")]
    assert [o[1] for o in spared] == ["ok"] * 5 and max(o[2] for o in spared) < 1.0
    served = [o for o in throttled if o[1] == "ok"]
    refused = [o for o in throttled if o[1] == "ran out"]
    assert refused, "20 requests in a burst: some run out of retries"
    # A second's worth at once, then the rate: never more than that.
    last = max(o[3] for o in served)
    assert 2 <= len(served) <= 2 + 2.0 * last
    assert any(o[2] > 0.05 for o in served), "some served only after a back-off"


def test_a_producer_stall_outlasts_two_epoch_ticks_and_a_collector_round() -> None:
    stalls = [f for seed in range(1, 201) for f in _draw(seed) if f.kind == "producer_stall"]
    assert len(stalls) > 100, "producer_stall should be in most seeds"
    for stall in stalls:
        assert not stall.target, "it stops the first producer, whatever the target"
        assert 15.0 <= stall.seconds <= 60.0 and stall.at + stall.seconds <= UNTIL


def test_a_stalled_tick_stops_its_node_past_the_roles_grant() -> None:
    stalls = [f for seed in range(1, 201) for f in _draw(seed) if f.kind == "stalled_tick"]
    assert len(stalls) > 100, "stalled_tick should be in most seeds"
    for stall in stalls:
        assert not stall.target, "whichever node ticks next"
        assert TTL <= stall.seconds <= 2 * TTL and stall.at + stall.seconds <= UNTIL


def test_a_stalled_tick_stops_the_first_node_to_write_a_slot_once() -> None:
    sched = Scheduler(random.Random(3))
    stall = Fault("stalled_tick", 5.0, 20.0)
    lines: list[str] = []
    network = Network(sched, random.Random(3), [stall], [0.0], lines.append)
    network.nodes.add("node-1")
    network.controller_prefix = controller_log_prefix("r")
    sent: list[tuple[str, float]] = []

    def writer(node: str, key: str, start: float) -> None:
        proc = Process(node)

        def write() -> None:
            network.call(node, proc, "PutObject?create", key, lambda: None, write=True)
            sent.append((f"{node} {key}", sched.now))

        sched.spawn(proc, node, write, delay=start)

    writer("node-1", "r/meta/nodes/node-1", 6.0)  # not a controller slot
    writer("gc-operator", "r/meta/controller/00000000000000000007", 6.0)  # not a node
    writer("node-1", "r/meta/controller/00000000000000000007", 7.0)
    writer("node-1", "r/meta/controller/00000000000000000008", 8.0)  # used up
    sched.run_until(60.0)
    answered = dict(sent)
    assert answered["node-1 r/meta/nodes/node-1"] < 7.0
    assert answered["gc-operator r/meta/controller/00000000000000000007"] < 7.0
    assert 27.0 <= answered["node-1 r/meta/controller/00000000000000000007"] < 28.0
    assert answered["node-1 r/meta/controller/00000000000000000008"] < 9.0
    assert sum("stopped 20.0s before" in line for line in lines) == 1


def test_a_hung_loop_leaves_time_to_judge_it_let_go_and_take_over_before_the_heal() -> None:
    hangs = [f for seed in range(1, 201) for f in _draw(seed) if f.kind == "hung_loop"]
    assert len(hangs) > 100, "hung_loop should be in most seeds"
    assert {f.pick < 0.5 for f in hangs} == {True, False}, "both loops"
    assert {f.pick % 0.5 >= 0.25 for f in hangs} == {True, False}, "hangs and deaths"
    for hang in hangs:
        assert hang.target in NODES
        assert 5.0 <= hang.at <= UNTIL - 6 * TTL - 20.0


def test_a_fixed_delay_late_landing_lands_every_request_that_late() -> None:
    sched = Scheduler(random.Random(3))
    late = Fault("late_landing", 0.0, 100.0, "node-1", late_by=4.0)
    network = Network(sched, random.Random(3), [late], [0.0], lambda _line: None)
    landed: list[tuple[str, float, float]] = []
    proc = Process("node-1")

    def requests() -> None:
        for node in ("node-1", "node-2", "node-1"):
            sent = sched.now
            network.call(
                node,
                proc,
                "PutObject",
                "k",
                lambda n=node, s=sent: landed.append((n, s, sched.now)),  # type: ignore[misc]
                write=True,
            )

    sched.spawn(proc, "requests", requests)
    sched.run_until(50.0)
    delays = [(node, round(at - sent, 1)) for node, sent, at in landed]
    # Half a round trip (milliseconds) plus the fault's delay, or none.
    assert delays == [("node-1", 4.0), ("node-2", 0.0), ("node-1", 4.0)]


def test_a_late_landing_of_writes_only_lets_reads_land_on_time() -> None:
    sched = Scheduler(random.Random(3))
    late = Fault("late_landing", 0.0, 100.0, "racer", late_by=2.0, writes_only=True)
    network = Network(sched, random.Random(3), [late], [0.0], lambda _line: None)
    landed: list[tuple[str, float]] = []
    proc = Process("racer")

    def requests() -> None:
        for op, write in (("GetObject", False), ("PutObject", True), ("ListObjectsV2", False)):
            sent = sched.now
            network.call(
                "racer",
                proc,
                op,
                "k",
                lambda o=op, s=sent: landed.append((o, round(sched.now - s, 1))),  # type: ignore[misc]
                write=write,
            )

    sched.spawn(proc, "requests", requests)
    sched.run_until(50.0)
    assert landed == [("GetObject", 0.0), ("PutObject", 2.0), ("ListObjectsV2", 0.0)]


def test_key_errors_leave_the_failing_keys_and_delete_the_rest() -> None:
    sched = Scheduler(random.Random(5))
    fault = Fault("key_errors", 0.0, 100.0, COLLECTOR, rate=0.5)
    network = Network(sched, random.Random(5), [fault], [0.0], lambda _line: None)
    keys = [f"epochgc/l0/000/{n:04d}" for n in range(40)]
    for key in [*keys, "other"]:
        network.bucket.put(key, b"x")
    confirmed: list[str] = []
    network.on_deleted = lambda deleted, _by: confirmed.extend(deleted)
    outcomes = []

    def deletes() -> None:
        outcomes.append(StoreView(network, COLLECTOR, Process(COLLECTOR)).delete_batch(keys))
        outcomes.append(StoreView(network, "node-1", Process("node-1")).delete_batch(["other"]))

    sched.spawn(Process(COLLECTOR), "deletes", deletes)
    sched.run_until(50.0)
    mine, other = outcomes
    left = {info.key for info in network.bucket.list_objects("")}
    assert mine.failed and mine.deleted, "half the keys fail, the rest are deleted"
    assert set(mine.failed) == left and set(mine.deleted) == set(keys) - left
    assert set(mine.failed).isdisjoint(mine.deleted) and sorted(confirmed) == sorted(
        [*mine.deleted, "other"]
    )
    assert (other.deleted, dict(other.failed)) == (("other",), {}), "only the fault's target"
