"""The Spark deletion job in tests: the configuration of a test's bucket
on the embedded S3 (``SHARDS`` shards, no minimum age) and one call that
runs the job on a SparkSession, as ``epochgc gc spark`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from epochgc.config import Config, load_config
from epochgc.events import EventChannel, Subscriber
from epochgc.gc.spark.job import SparkOutcome, SparkRunOptions, run_spark_gc
from epochgc.gc.spark.tasks import ClientCreated
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.wiring.settings import client_settings_of, spark_gc_settings_of
from tests.support.config_files import write_gc_config

ROOT = "epochgc"
SHARDS = 8
M = 10
"""The safe epoch the Spark tests' worlds are built for."""


def make_config(
    tmp_path: Path, s3: EmbeddedS3, bucket: str, extra: str = "", **options: Any
) -> Config:
    """The configuration of ``bucket`` (``SHARDS`` shards, no minimum
    object age, no delete-fraction guard unless ``options`` say), written
    in ``tmp_path``, loaded. ``extra`` follows inside ``[gc]``."""
    path = tmp_path / "spark.toml"
    return load_config(
        write_gc_config(path, s3.endpoint_url, bucket, extra, **({"shards": SHARDS} | options))
    )


def run_job(
    spark: Any,
    config: Config,
    store: ObjectStore,
    s3: EmbeddedS3,
    *,
    on_client_created: Subscriber[ClientCreated] | None = None,
    **options: Any,
) -> SparkOutcome:
    """One run of the deletion job, its tasks' S3 clients pointed at ``s3``;
    ``on_client_created`` (it must pickle) hears each task's new client."""
    task_events = EventChannel()
    if on_client_created is not None:
        task_events.subscribe(ClientCreated, on_client_created)
    return run_spark_gc(
        spark,
        spark_gc_settings_of(config),
        store,
        RequestStats(),
        client_settings_of(config, s3.endpoint_url),
        SparkRunOptions(**options),
        task_events=task_events,
    )
