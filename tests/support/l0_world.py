"""A collector's world in two calls: one partition reporting its ``M(p)``,
and L0 keys over shards and epochs (seeded by the caller)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from epochgc.storage.keys import encode_l0_key
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.safe_epoch.reports import NodeReport, PartitionReport, publish_report


def report_safe_epoch(
    store: ObjectStore, root: str, topic: str, revision: int, safe_epoch: int
) -> None:
    """``node-1`` reports partition 0 of ``topic`` at ``M(p) = safe_epoch``
    (replacing its last report)."""
    partition = PartitionReport(topic, revision, 0, 1, safe_epoch, 0, 7, 7)
    publish_report(store, root, NodeReport("node-1", datetime.now(UTC), (partition,)))


def l0_keys(root: str, shards: int, epochs: range, per_epoch: int) -> list[str]:
    """``per_epoch`` fresh L0 keys in each of ``shards`` shards for every epoch."""
    return [
        encode_l0_key(root, shard, epoch, str(uuid.uuid4()))
        for shard in range(shards)
        for epoch in epochs
        for _ in range(per_epoch)
    ]
