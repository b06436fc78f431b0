"""The Spark deletion job on a real local SparkSession and the embedded S3:
listing and inventory modes (CSV and Parquet), stale inventories, refusals,
dry runs and the guards."""

from __future__ import annotations

import hashlib
import io
import json
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from epochgc.config import Config, load_config
from epochgc.errors import EpochGCError, InvalidArgumentError
from epochgc.gc.collection_round import CollectSettings, SafetyBlockedError, collect_once
from epochgc.gc.control import pause
from epochgc.gc.run_report import decode_summary
from epochgc.gc.spark.job import SparkRunOptions, run_spark_gc
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.inventory import InventoryError, build_inventory
from epochgc.storage.keys import encode_l0_key, parse_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.wiring.settings import client_settings_of, inventory_location, spark_gc_settings_of
from tests.support.config_files import write_server_config
from tests.support.moto_seed import seed_objects
from tests.support.pausing import PauseAfterFirstControlRead
from tests.support.servers import pushgateway

ROOT = "epochgc"
SHARDS = 8
M = 10


def make_config(tmp_path: Path, s3: EmbeddedS3, bucket: str, extra: str = "") -> Config:
    path = write_server_config(
        tmp_path / "spark.toml",
        s3.endpoint_url,
        bucket,
        f"[layout]\nl0_shards = {SHARDS}\n"
        "[gc]\nmin_object_age_seconds = 0.0\nmax_delete_fraction = 1.0\n" + extra,
    )
    return load_config(path)


@pytest.fixture
def world(store: S3ObjectStore, bucket: str) -> dict[str, list[str]]:
    """No topics and the controller at 10, so M = 10. L0 objects at epochs
    1..15 in every shard, plus keys the job must never touch."""
    Controller(store, ROOT).advance_to(M)
    l0 = [
        encode_l0_key(ROOT, s, e, str(uuid.uuid4()))
        for s in range(SHARDS)
        for e in range(1, 16)
        for _ in range(3)
    ]
    junk = [
        f"{ROOT}/l0/001/000000000000000001/not-a-uuid",
        f"{ROOT}2/l0/001/000000000000000001/{uuid.uuid4()}",
        "elsewhere/file",
    ]
    seed_objects(bucket, l0 + junk)
    return {
        "eligible": [k for k in l0 if parse_l0_key(k, ROOT).epoch <= M],  # type: ignore[union-attr]
        "kept": [k for k in l0 if parse_l0_key(k, ROOT).epoch > M] + junk,  # type: ignore[union-attr]
    }


def left(store: S3ObjectStore) -> set[str]:
    return {o.key for o in store.list_objects("") if not o.key.startswith(f"{ROOT}/meta/")}


def run(spark: Any, config: Config, store: S3ObjectStore, s3: EmbeddedS3, **options: Any):  # type: ignore[no-untyped-def]
    return run_spark_gc(
        spark,
        spark_gc_settings_of(config),
        store,
        RequestStats(),
        client_settings_of(config, s3.endpoint_url),
        SparkRunOptions(**options),
    )


def not_runs(keys: set[str]) -> set[str]:
    return {k for k in keys if not k.startswith(f"{ROOT}/gc/") and not k.startswith("inventory/")}


def test_listing_mode_deletes_exactly_the_eligible(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    config = make_config(tmp_path, s3_server, store.bucket)
    outcome = run(spark, config, store, s3_server, mode="listing", listing_tasks=3)
    assert not_runs(left(store)) == set(world["kept"])
    s = outcome.summary
    assert (s.engine, s.safe_epoch, s.deleted, s.errors) == (
        "spark-listing",
        M,
        len(world["eligible"]),
        0,
    )
    assert outcome.tasks == 3
    stored = decode_summary(store.get(outcome.summary_key).body)
    assert stored.deleted == len(world["eligible"]) and stored.skipped["unparseable"] == 1


@pytest.mark.parametrize("file_format", ["CSV", "Parquet"])
def test_inventory_mode_deletes_exactly_the_eligible(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
    file_format: str,
) -> None:
    config = make_config(tmp_path, s3_server, store.bucket)
    build_inventory(
        store,
        store,
        inventory_location(config),
        store.list_objects(""),
        file_format=file_format,
        rows_per_file=100,
    )
    outcome = run(spark, config, store, s3_server, mode="inventory")
    assert not_runs(left(store)) == set(world["kept"])
    s = outcome.summary
    assert s.engine == "spark-inventory" and s.deleted == len(world["eligible"]) and s.errors == 0
    assert s.skipped["outside_root"] >= 2 and s.skipped["unparseable"] == 1
    assert outcome.tasks > 1


def test_a_stale_inventory_is_still_safe(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    config = make_config(tmp_path, s3_server, store.bucket)
    build_inventory(
        store,
        store,
        inventory_location(config),
        store.list_objects(f"{ROOT}/l0/"),
        file_format="CSV",
    )
    already_gone = world["eligible"][:10]
    store.delete_many(already_gone)
    written_after = [encode_l0_key(ROOT, 0, 2, str(uuid.uuid4())) for _ in range(5)]
    seed_objects(store.bucket, written_after)
    outcome = run(spark, config, store, s3_server, mode="inventory")
    assert outcome.summary.errors == 0, "keys already deleted are not errors"
    assert not_runs(left(store)) == set(world["kept"]) | set(written_after)


def _write_manifest(
    store: S3ObjectStore, config: Config, doc: dict[str, Any], checksum: str | None
) -> None:
    base = inventory_location(config).base + "2026-11-22T00-00Z/"
    data = json.dumps(doc).encode()
    store.put(base + "manifest.json", data)
    store.put(base + "manifest.checksum", (checksum or hashlib.md5(data).hexdigest()).encode())


def test_a_bad_checksum_or_a_schema_without_key_is_refused(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    config = make_config(tmp_path, s3_server, store.bucket)
    doc = {
        "sourceBucket": store.bucket,
        "destinationBucket": f"arn:aws:s3:::{store.bucket}",
        "version": "2016-11-30",
        "creationTimestamp": "1763769600000",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate",
        "files": [{"key": "inventory/x.csv.gz", "size": 1, "MD5checksum": "00"}],
    }
    _write_manifest(store, config, doc, checksum="0" * 32)
    with pytest.raises(InventoryError, match="checksum"):
        run(spark, config, store, s3_server, mode="inventory")
    _write_manifest(store, config, {**doc, "fileSchema": "Bucket, Size"}, checksum=None)
    with pytest.raises(InventoryError, match="no 'Key' column"):
        run(spark, config, store, s3_server, mode="inventory")
    assert not_runs(left(store)) == set(world["eligible"]) | set(world["kept"])


@pytest.mark.parametrize("mode", ["listing", "inventory"])
def test_dry_run_deletes_nothing_and_writes_the_plan(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
    mode: str,
) -> None:
    config = make_config(tmp_path, s3_server, store.bucket)
    build_inventory(
        store, store, inventory_location(config), store.list_objects(""), file_format="Parquet"
    )
    outcome = run(spark, config, store, s3_server, mode=mode, dry_run=True)
    assert not_runs(left(store)) == set(world["eligible"]) | set(world["kept"])
    assert outcome.summary.dry_run and outcome.summary.deleted == 0
    assert outcome.plan_prefix is not None
    planned: list[str] = []
    for info in store.list_objects(outcome.plan_prefix):
        planned += pq.read_table(io.BytesIO(store.get(info.key).body)).column("key").to_pylist()
    assert sorted(planned) == sorted(world["eligible"])


def test_max_epoch_above_m_needs_its_own_flag_and_force_is_not_it(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    config = make_config(tmp_path, s3_server, store.bucket)
    Controller(store, ROOT).create_topic("orders", 1)  # revision 11: M stays 10, offset 11
    with pytest.raises(InvalidArgumentError, match="above the computed M"):
        run(spark, config, store, s3_server, max_epoch=M + 1)
    with pytest.raises(InvalidArgumentError, match="--allow-max-epoch-above-m"):
        run(spark, config, store, s3_server, max_epoch=M + 1, force=True)
    with pytest.raises(InvalidArgumentError, match="above the cluster epoch"):
        run(spark, config, store, s3_server, max_epoch=M + 2, force=True, allow_above_m=True)
    assert not_runs(left(store)) == set(world["eligible"]) | set(world["kept"])
    outcome = run(spark, config, store, s3_server, max_epoch=3)
    assert outcome.summary.safe_epoch == 3
    epochs_left = {parse_l0_key(k, ROOT).epoch for k in left(store) if parse_l0_key(k, ROOT)}  # type: ignore[union-attr]
    assert min(epochs_left) == 4
    above = run(spark, config, store, s3_server, max_epoch=M + 1, allow_above_m=True)
    assert above.summary.safe_epoch == M + 1
    epochs_left = {parse_l0_key(k, ROOT).epoch for k in left(store) if parse_l0_key(k, ROOT)}  # type: ignore[union-attr]
    assert min(epochs_left) == M + 2


def test_a_pause_stops_the_job_and_a_dry_run_still_runs(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    config = make_config(tmp_path, s3_server, store.bucket)
    pause(store, ROOT, by="carol", reason="audit", now=datetime.now(UTC))
    with pytest.raises(EpochGCError, match=r"^paused by carol: audit$"):
        run(spark, config, store, s3_server, force=True)
    assert not_runs(left(store)) == set(world["eligible"]) | set(world["kept"])
    dry = run(spark, config, store, s3_server, dry_run=True)
    assert dry.summary.eligible == len(world["eligible"])


def test_a_pause_between_the_counting_and_the_deleting_stage_stops_the_job(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    config = load_config(
        write_server_config(
            tmp_path / "guard.toml",
            s3_server.endpoint_url,
            store.bucket,
            f"[layout]\nl0_shards = {SHARDS}\n[gc]\nmin_object_age_seconds = 0.0\n"
            "max_delete_fraction = 0.9\n",
        )
    )
    pausing = PauseAfterFirstControlRead(store, ROOT, by="dave", reason="stop now")
    with pytest.raises(EpochGCError, match=r"^paused by dave: stop now$"):
        run(spark, config, pausing, s3_server)
    assert pausing.control_reads == 2
    assert not_runs(left(store)) == set(world["eligible"]) | set(world["kept"])


def test_listing_mode_sweeps_every_shard_in_the_bucket(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    others = [encode_l0_key(ROOT, s, e, str(uuid.uuid4())) for s in (8, 40, 999) for e in (2, 12)]
    foreign = [f"{ROOT}/l0/0040/{2:018d}/{uuid.uuid4()}", f"{ROOT}/l0/x/{2:018d}/{uuid.uuid4()}"]
    seed_objects(store.bucket, others + foreign)
    config = make_config(tmp_path, s3_server, store.bucket)
    outcome = run(spark, config, store, s3_server, listing_tasks=3)
    kept_others = {k for k in others if "/000000000000000012/" in k}
    assert not_runs(left(store)) == set(world["kept"]) | kept_others | set(foreign)
    assert outcome.summary.deleted == len(world["eligible"]) + 3


def test_the_delete_fraction_guard_stops_the_job(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    config = make_config(tmp_path, s3_server, store.bucket, "")
    config = load_config(
        write_server_config(
            tmp_path / "guard.toml",
            s3_server.endpoint_url,
            store.bucket,
            f"[layout]\nl0_shards = {SHARDS}\n[gc]\nmin_object_age_seconds = 0.0\n"
            "max_delete_fraction = 0.5\n",
        )
    )
    outcome = run(spark, config, store, s3_server)
    assert outcome.stopped_by_guard is not None and not outcome.summary.success
    assert not_runs(left(store)) == set(world["eligible"]) | set(world["kept"])


def test_run_metrics_arrive_through_a_real_pushgateway(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    with pushgateway(tmp_path) as gateway:
        config = make_config(
            tmp_path, s3_server, store.bucket, f'[metrics]\npushgateway = "{gateway}"\n'
        )
        outcome = run(spark, config, store, s3_server)
        text = urllib.request.urlopen(f"http://{gateway}/metrics", timeout=5).read().decode()
    deleted = len(world["eligible"])
    assert outcome.summary.deleted == deleted
    assert (
        f'epochgc_gc_run_deleted_objects{{engine="spark-listing",instance="",job="epochgc_spark"}} '
        f"{deleted}" in text
    )
    assert (
        'epochgc_gc_run_safe_epoch{engine="spark-listing",instance="",job="epochgc_spark"} 10'
        in text
    )


def test_untrusted_inputs_refuse_the_job_naming_the_cause_as_gc_collect_does(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    world: dict[str, list[str]],
) -> None:
    """An unreadable controller entry blocks the job before Spark runs, and
    the one line names that entry, word for word as ``gc collect`` does."""
    bad = f"{ROOT}/meta/controller/{M + 1:020d}"
    store.put_if_absent(bad, b"garbage")
    config = make_config(tmp_path, s3_server, store.bucket)
    with pytest.raises(SafetyBlockedError) as blocked_collect:
        collect_once(
            store,
            RequestStats(),
            ROOT,
            CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0),
        )
    with pytest.raises(SafetyBlockedError) as blocked_spark:
        run(spark, config, store, s3_server, mode="listing")
    assert str(blocked_spark.value) == str(blocked_collect.value)
    assert f"controller entry {M + 1}:" in str(blocked_spark.value)
    assert not_runs(left(store)) == set(world["eligible"]) | set(world["kept"])
