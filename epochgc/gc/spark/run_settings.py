"""What a ``gc spark`` run takes from the configuration. Its own module so
that building it (``wiring.settings``) imports no Spark and no pyarrow: the
base install runs every other command without the ``spark`` extra."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from epochgc.storage.retry import RetryPolicy

if TYPE_CHECKING:  # storage.inventory imports pyarrow (the spark extra)
    from epochgc.storage.inventory import InventoryLocation


@dataclass(frozen=True)
class SparkGcSettings:
    """What a ``gc spark`` run takes from the configuration
    (``wiring.settings.spark_gc_settings_of``)."""

    root: str
    bucket: str
    min_age: timedelta
    retry: RetryPolicy
    delete_concurrency: int
    shard_concurrency: int
    rate_limit_keys_per_second: float
    """Keys per second for the whole job, shared by its tasks; 0: no limit."""
    max_delete_fraction: float
    credentials: str
    """``driver`` or ``executor`` (``gc/spark/credentials.py``)."""
    inventory: InventoryLocation
    pushgateway: str = ""
    record_deletions: bool = True
    """Each deleting task writes the keys it deleted (``gc.deletion_record``)."""
