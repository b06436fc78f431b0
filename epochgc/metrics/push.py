"""Pushing a one-shot run's metrics to a Pushgateway (the Spark job, whose
process ends before any scrape could come). Gauges describe the last run of
a job; Prometheus keeps the history."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

log = logging.getLogger(__name__)

SPARK_JOB = "epochgc_spark"
COLLECT_JOB = "epochgc_collect"
"""Pushgateway job of one-shot ``epochgc gc collect`` runs."""

RUN_GAUGES = {
    "safe_epoch": "M the last run used.",
    "listed_objects": "Objects the last run listed.",
    "eligible_objects": "Objects it found eligible.",
    "deleted_objects": "Objects it deleted.",
    "deleted_bytes": "Bytes it deleted.",
    "errors": "Keys or files it failed on.",
    "duration_seconds": "How long it took.",
    "success": "1 if it finished without errors.",
    "last_completion_timestamp_seconds": "When it finished (Unix time).",
    "request_cost_dollars": "Modelled dollars of its S3 requests at the [cost] prices.",
}
"""``epochgc_gc_run_<name>``: the figures a run pushes."""


def run_registry(
    engine: str, figures: Mapping[str, float], skipped: Mapping[str, int]
) -> CollectorRegistry:
    """A fresh registry holding one run's figures.

    Raises:
        ValueError: a figure not in ``RUN_GAUGES``.
    """
    registry = CollectorRegistry()
    for name, value in figures.items():
        if name not in RUN_GAUGES:
            raise ValueError(f"unknown run figure {name!r}")
        gauge = Gauge(f"epochgc_gc_run_{name}", RUN_GAUGES[name], ["engine"], registry=registry)
        gauge.labels(engine).set(value)
    by_reason = Gauge(
        "epochgc_gc_run_skipped_objects",
        "Objects the last run skipped, by reason.",
        ["engine", "reason"],
        registry=registry,
    )
    for reason, count in skipped.items():
        by_reason.labels(engine, reason).set(count)
    return registry


def push_run(
    gateway: str,
    engine: str,
    figures: Mapping[str, float],
    skipped: Mapping[str, int],
    *,
    job: str = SPARK_JOB,
) -> bool:
    """Push one run's figures; a Pushgateway that is down is logged, never
    fatal (the run report in the bucket is the record)."""
    try:
        push_to_gateway(
            gateway, job=job, registry=run_registry(engine, figures, skipped), timeout=10
        )
    except OSError as err:
        log.warning("could not push run metrics to %s: %s", gateway, err)
        return False
    log.info("pushed run metrics to %s (job %s)", gateway, job)
    return True
