"""The stuck-partition gauge: one series per stuck partition, none else."""

from __future__ import annotations

import dataclasses

from prometheus_client import CollectorRegistry, generate_latest

from epochgc.metrics.custom_collectors import NodeCollector, NodeSample, StuckSample

ZERO = {
    f.name: 0
    for f in dataclasses.fields(NodeSample)
    if f.name not in ("node_id", "stuck", "ownership_moves")
}


def scrape(sample: NodeSample) -> str:
    registry = CollectorRegistry()
    registry.register(NodeCollector(lambda: [sample]))
    return generate_latest(registry).decode()


def test_only_stuck_partitions_have_a_series() -> None:
    healthy = scrape(NodeSample(node_id="n1", **ZERO))  # type: ignore[arg-type]
    assert "# TYPE epochgc_partition_stuck gauge" in healthy
    assert "epochgc_partition_stuck{" not in healthy
    stuck = scrape(
        NodeSample(node_id="n1", stuck=(StuckSample("orders", 3, "missing"),), **ZERO)  # type: ignore[arg-type]
    )
    assert (
        'epochgc_partition_stuck{cause="missing",node="n1",partition="3",topic="orders"} 1.0'
        in stuck
    )
