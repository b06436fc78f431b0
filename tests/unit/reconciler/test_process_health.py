"""The wiring of the progress watchdog into a node: its lease's renewal
gate, the default bound, ``/healthz`` and the process backstop."""

from __future__ import annotations

import threading

from epochgc.leases.timing import LeasePolicy
from epochgc.reconciler.node_settings import NodeSettings
from epochgc.reconciler.process_health import StallBackstop, reconciler_health
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.watermarks.partition.directory import LeaderDirectory
from tests.support.nodes import reconciler_node

POLICY = LeasePolicy(ttl_seconds=15.0, renew_interval_seconds=5.0, skew_margin_seconds=2.0)


def _node(clock: VirtualClock, settings: NodeSettings | None = None):  # type: ignore[no-untyped-def]
    return reconciler_node(
        MemoryStore(clock),
        "epochgc",
        "node-a",
        LeaderDirectory(),
        settings=settings,
        policy=POLICY,
        now=clock.now,
        monotonic=clock.monotonic,
    )


def test_the_bound_defaults_to_four_lease_ttls_and_the_setting_wins() -> None:
    clock = VirtualClock()
    node, _owns = _node(clock)
    assert node.watchdog.bound_seconds == 60.0
    node, _owns = _node(clock, NodeSettings(max_round_seconds=7.5))
    assert node.watchdog.bound_seconds == 7.5


def test_a_stopped_loop_closes_the_lease_the_heartbeat_would_renew() -> None:
    clock = VirtualClock()
    node, owns = _node(clock)
    lease = owns.lease
    assert lease.try_acquire()
    etag = lease.etag
    clock.advance(POLICY.renew_interval_seconds)
    assert lease.renew_if_due() and lease.etag != etag, "renewed while the loops progress"
    node.watchdog.watch("ownership", clock.monotonic())
    node.watchdog.died("ownership", KeyError("x"), clock.monotonic())
    etag = lease.etag
    clock.advance(POLICY.renew_interval_seconds)
    assert not lease.renew_if_due(), "the heartbeat renews no more"
    assert lease.etag == etag
    assert not lease.is_valid(), "owns nothing from the verdict on, before its grant runs out"
    assert owns.owned() == frozenset()
    assert not lease.try_acquire(), "nor takes it again"
    assert lease.closed_by == "loop ownership stopped: KeyError: 'x'"
    lease.release()  # still ours to release: the peers need not wait a TTL
    assert lease.etag is None


def test_healthz_is_503_naming_the_loop_once_one_stopped() -> None:
    clock = VirtualClock()
    node, _owns = _node(clock)
    healthy, details = reconciler_health(node, lambda: True)
    assert healthy and details == {"node": "node-a", "led_partitions": 0, "ticker": True}
    node.watchdog.watch("rounds", clock.monotonic(), allowance_seconds=1.0)
    clock.advance(61.5)
    healthy, details = reconciler_health(node, lambda: False)
    assert not healthy
    assert details["loop"] == "rounds"
    assert str(details["reason"]).startswith("loop rounds stopped: no round completed for 61.50s")
    assert details["reasons"] == [details["reason"]]


def test_the_backstop_exits_when_the_node_does_not_within_its_grace(caplog) -> None:  # type: ignore[no-untyped-def]
    # An event loop blocked by its own loop never gets to exit: the
    # backstop thread does, after logging the node's one line.
    clock = VirtualClock()
    node, _owns = _node(clock)
    exited = threading.Event()

    backstop = StallBackstop(node, exited.set, grace_seconds=0.2, poll_seconds=0.01)
    backstop.start()
    try:
        assert not exited.wait(0.1), "nothing stopped: nothing to do"
        node.watchdog.watch("rounds", clock.monotonic())
        node.watchdog.died("rounds", RuntimeError("boom"), clock.monotonic())
        assert exited.wait(5)
    finally:
        backstop.stop()
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        "node node-a: loop rounds stopped: RuntimeError: boom; it renews its lease no more, "
        "lets go of its partitions and exits, for its supervisor to restart it"
    ]
