"""A reconciler node's and a producer's metrics, read from a real registry
after real work on the embedded S3: values match what happened, and node
counters survive a partition changing hands."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from epochgc.config import Config, OwnershipConfig
from epochgc.errors import RetriesExhaustedError
from epochgc.ingest.producer import Producer, acknowledged_into
from epochgc.ingest.producer_samples import producer_sample
from epochgc.metrics.instruments import ProducerMetrics
from epochgc.reconciler.node import ReconcilerNode
from epochgc.reconciler.process_health import NodeMetrics
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.wiring.reconciler_process import build_node
from tests.support.faults import HookedStore
from tests.support.nodes import producer_for

ROOT = "epochgc"
CONFIG = Config(ownership=OwnershipConfig(round_interval_seconds=0.1))
"""A node registers, then plans its first ownership round an interval
later: a short one keeps the tests quick."""


async def first_rounds(node: ReconcilerNode) -> None:
    """Rounds until the node leads what it owns (its first ownership round
    waits one interval after it registers)."""
    for _ in range(100):
        await node.run_round()
        if node.led_partitions():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the node never led anything")


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    assert found is not None, f"{name}{labels} not exported"
    return found


def test_node_and_producer_metrics_follow_the_work(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    revision = controller.create_topic("orders", 2).revision
    registry = CollectorRegistry()

    async def scenario() -> None:
        directory = LeaderDirectory()
        node, leases = build_node(CONFIG, store, "node-a", directory, metrics=NodeMetrics(registry))
        await first_rounds(node)
        rounds = node.stats.rounds
        assert value(registry, "epochgc_partition_led", node="node-a") == 2
        assert value(registry, "epochgc_lease_acquisitions_total", node="node-a") == 2
        assert value(registry, "epochgc_node_partitions_owned", node="node-a") == 2
        taken = value(registry, "epochgc_node_ownership_moves_total", node="node-a", kind="taken")
        assert taken == 2
        assert value(registry, "epochgc_node_lease_renew_seconds", node="node-a") >= 0
        producers: list[Producer] = []
        metrics = ProducerMetrics(registry, lambda: producer_sample(producers[0].stats))
        producer = producer_for(
            store,
            ROOT,
            directory,
            controller,
            revision_of=lambda _topic: revision,
            events=acknowledged_into(metrics.latency.observe),
        )
        producers.append(producer)
        await producer.produce("orders", 0, [b"a", b"b", b"c"])
        await producer.produce("orders", 1, [b"d"])
        await producer.close()
        await node.run_round()
        assert value(registry, "epochgc_reconciler_records_total", node="node-a") == 4
        assert value(registry, "epochgc_partition_appends_total", node="node-a") >= 2
        admitted = value(
            registry, "epochgc_fence_admissions_total", node="node-a", result="same_epoch"
        ) + value(registry, "epochgc_fence_admissions_total", node="node-a", result="new_epoch")
        assert admitted >= 2
        assert value(registry, "epochgc_producer_records_acked_total") == 4
        assert value(registry, "epochgc_producer_latency_seconds_count") == 2
        assert (
            value(registry, "epochgc_reconciler_round_duration_seconds_count", node="node-a")
            == rounds + 1
        )
        await node.stop()
        leases.stop()
        # Stepping down keeps the totals: counters never go backwards.
        assert value(registry, "epochgc_partition_led", node="node-a") == 0
        after = value(
            registry, "epochgc_fence_admissions_total", node="node-a", result="same_epoch"
        ) + value(registry, "epochgc_fence_admissions_total", node="node-a", result="new_epoch")
        assert after == admitted
        assert value(registry, "epochgc_partition_appends_total", node="node-a") >= 2

    asyncio.run(scenario())


def test_a_term_spent_by_a_failed_reconciler_append_is_restarted(store: S3ObjectStore) -> None:
    """Found by `epochgc verify`: a leader broken by the reconciler's own
    append (not through the leader service) must not keep its partition."""
    controller = Controller(store, ROOT)
    revision = controller.create_topic("orders", 1).revision
    failing = {"on": False}

    def before_create(key: str, _body: bytes) -> None:
        if failing["on"] and "/meta/partitions/" in key and "/log/" in key:
            raise RetriesExhaustedError("injected: append lost", None)

    hooked = HookedStore(store, before_create=before_create)

    async def scenario() -> None:
        directory = LeaderDirectory()
        node, leases = build_node(CONFIG, hooked, "node-a", directory)  # type: ignore[arg-type]
        await first_rounds(node)
        (service,) = node.led_services()
        first_term = service.term
        producer = producer_for(
            store, ROOT, directory, controller, revision_of=lambda _topic: revision
        )
        offsets = await producer.produce("orders", 0, [b"a", b"b"])
        await producer.close()
        failing["on"] = True
        await node.run_round()  # the reconciler's append fails: the term is spent
        assert not service.is_open
        failing["on"] = False
        await node.run_round()  # steps down, bumps the term
        await node.run_round()  # leads again and reconciles
        (again,) = node.led_services()
        assert again.term > first_term and again.is_open
        assert again.leader.replica.state.lro >= offsets[-1]
        await node.stop()
        leases.stop()

    asyncio.run(scenario())
