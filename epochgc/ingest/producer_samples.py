"""The reference producer's figures for the metrics layer."""

from __future__ import annotations

from dataclasses import asdict

from epochgc.ingest.producer import ProducerStats
from epochgc.metrics.custom_collectors import ProducerSample


def producer_sample(stats: ProducerStats) -> ProducerSample:
    """The producer's counters, read at scrape time (the two classes have
    the same fields: metrics may not import the producer)."""
    return ProducerSample(**asdict(stats))
