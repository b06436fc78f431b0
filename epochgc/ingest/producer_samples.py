"""The reference producer's figures for the metrics layer."""

from __future__ import annotations

from epochgc.ingest.producer import ProducerStats
from epochgc.metrics.custom_collectors import ProducerSample


def producer_sample(stats: ProducerStats) -> ProducerSample:
    """The producer's counters, read at scrape time."""
    return ProducerSample(
        l0_objects=stats.l0_objects,
        l0_bytes=stats.l0_bytes,
        records_acked=stats.records_acked,
        stale_epoch_retries=stats.stale_epoch_retries,
        orphaned_uploads=stats.orphaned_uploads,
        replays=stats.replays,
    )
