"""The Spark deletion job on a real local SparkSession and the embedded S3:
listing and inventory modes (CSV and Parquet), stale inventories, refusals,
dry runs and the guards."""

from __future__ import annotations

import hashlib
import io
import json
import urllib.request
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from epochgc.config import Config
from epochgc.errors import EpochGCError, InvalidArgumentError, InventoryError, SafetyBlockedError
from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.control import pause
from epochgc.gc.deletion_record import deleted_keys
from epochgc.gc.run_report import decode_summary
from epochgc.gc.spark.job import SparkOutcome
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.inventory import build_inventory
from epochgc.storage.keys import encode_l0_key, parse_l0_key
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.wiring.settings import inventory_location
from tests.support.moto_seed import seed_objects
from tests.support.pausing import PauseAfterFirstControlRead
from tests.support.servers import pushgateway
from tests.support.spark_job import ROOT, SHARDS, M, make_config, run_job


@dataclass(frozen=True)
class World:
    """What ``world`` seeded: the L0 keys at or below ``M``, and the keys the
    job must keep (above ``M``, or not L0 objects at all)."""

    eligible: list[str]
    kept: list[str]

    @property
    def everything(self) -> set[str]:
        return set(self.eligible) | set(self.kept)


@pytest.fixture
def world(store: S3ObjectStore, bucket: str) -> World:
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
    return World(
        eligible=[k for k in l0 if parse_l0_key(k, ROOT).epoch <= M],  # type: ignore[union-attr]
        kept=[k for k in l0 if parse_l0_key(k, ROOT).epoch > M] + junk,  # type: ignore[union-attr]
    )


@dataclass(frozen=True)
class Job:
    """The deletion job on the test's bucket, with ``config`` (no minimum
    age, no delete-fraction guard) unless a test builds another."""

    spark: Any
    tmp_path: Path
    s3: EmbeddedS3
    store: S3ObjectStore
    config: Config

    def run(self, store: ObjectStore | None = None, **options: Any) -> SparkOutcome:
        return run_job(self.spark, self.config, store or self.store, self.s3, **options)

    def configured(self, extra: str = "", **options: Any) -> Job:
        """This job with another configuration (``make_config``'s)."""
        return replace(
            self, config=make_config(self.tmp_path, self.s3, self.store.bucket, extra, **options)
        )

    def build_inventory(self, file_format: str, prefix: str = "", **options: Any) -> None:
        """An inventory of the keys under ``prefix`` now, where ``config``
        says the job finds it."""
        build_inventory(
            self.store,
            self.store,
            inventory_location(self.config),
            self.store.list_objects(prefix),
            file_format=file_format,
            **options,
        )

    def left(self) -> set[str]:
        """The keys left in the bucket, but for epochgc's own records and
        the inventory."""
        return {
            o.key
            for o in self.store.list_objects("")
            if not o.key.startswith((f"{ROOT}/meta/", f"{ROOT}/gc/", "inventory/"))
        }


@pytest.fixture
def job(spark: Any, tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore) -> Job:
    return Job(spark, tmp_path, s3_server, store, make_config(tmp_path, s3_server, store.bucket))


def test_listing_mode_deletes_exactly_the_eligible(job: Job, world: World) -> None:
    outcome = job.run(mode="listing", listing_tasks=3)
    assert job.left() == set(world.kept)
    s = outcome.summary
    assert (s.engine, s.safe_epoch, s.deleted, s.errors) == (
        "spark-listing",
        M,
        len(world.eligible),
        0,
    )
    assert outcome.tasks == 3
    stored = decode_summary(job.store.get(outcome.summary_key).body)
    assert stored.deleted == len(world.eligible) and stored.skipped["unparseable"] == 1
    assert stored.unparseable_keys == (f"{ROOT}/l0/001/000000000000000001/not-a-uuid",)
    # each task recorded what it deleted, in a part of its own
    recorded = list(deleted_keys(job.store, ROOT, s.run_id))
    assert sorted(r.key for r in recorded) == sorted(world.eligible)
    assert {r.m for r in recorded} == {M}
    parts = list(job.store.list_objects(f"{ROOT}/gc/runs/{s.run_id}/deleted/"))
    assert 1 < len(parts) <= 3


@pytest.mark.parametrize("file_format", ["CSV", "Parquet"])
def test_inventory_mode_deletes_exactly_the_eligible(
    job: Job, world: World, file_format: str
) -> None:
    job.build_inventory(file_format, rows_per_file=100)
    outcome = job.run(mode="inventory")
    assert job.left() == set(world.kept)
    s = outcome.summary
    assert s.engine == "spark-inventory" and s.deleted == len(world.eligible) and s.errors == 0
    assert s.skipped["outside_root"] >= 2 and s.skipped["unparseable"] == 1
    assert s.unparseable_keys == (f"{ROOT}/l0/001/000000000000000001/not-a-uuid",)
    assert outcome.tasks > 1
    recorded = list(deleted_keys(job.store, ROOT, s.run_id))
    assert sorted(r.key for r in recorded) == sorted(world.eligible)


def test_a_stale_inventory_is_still_safe(job: Job, world: World) -> None:
    job.build_inventory("CSV", prefix=f"{ROOT}/l0/")
    already_gone = world.eligible[:10]
    job.store.delete_many(already_gone)
    written_after = [encode_l0_key(ROOT, 0, 2, str(uuid.uuid4())) for _ in range(5)]
    seed_objects(job.store.bucket, written_after)
    outcome = job.run(mode="inventory")
    assert outcome.summary.errors == 0, "keys already deleted are not errors"
    assert job.left() == set(world.kept) | set(written_after)


def _write_manifest(job: Job, doc: dict[str, Any], checksum: str | None) -> None:
    base = inventory_location(job.config).base + "2026-11-22T00-00Z/"
    data = json.dumps(doc).encode()
    job.store.put(base + "manifest.json", data)
    job.store.put(base + "manifest.checksum", (checksum or hashlib.md5(data).hexdigest()).encode())


def test_a_bad_checksum_or_a_schema_without_key_is_refused(job: Job, world: World) -> None:
    doc = {
        "sourceBucket": job.store.bucket,
        "destinationBucket": f"arn:aws:s3:::{job.store.bucket}",
        "version": "2016-11-30",
        "creationTimestamp": "1763769600000",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate",
        "files": [{"key": "inventory/x.csv.gz", "size": 1, "MD5checksum": "00"}],
    }
    _write_manifest(job, doc, checksum="0" * 32)
    with pytest.raises(InventoryError, match="checksum"):
        job.run(mode="inventory")
    _write_manifest(job, {**doc, "fileSchema": "Bucket, Size"}, checksum=None)
    with pytest.raises(InventoryError, match="no 'Key' column"):
        job.run(mode="inventory")
    assert job.left() == world.everything


@pytest.mark.parametrize("mode", ["listing", "inventory"])
def test_dry_run_deletes_nothing_and_writes_the_plan(job: Job, world: World, mode: str) -> None:
    job.build_inventory("Parquet")
    outcome = job.run(mode=mode, dry_run=True)
    assert job.left() == world.everything
    assert outcome.summary.dry_run and outcome.summary.deleted == 0
    assert outcome.plan_prefix is not None
    planned: list[str] = []
    for info in job.store.list_objects(outcome.plan_prefix):
        planned += pq.read_table(io.BytesIO(job.store.get(info.key).body)).column("key").to_pylist()
    assert sorted(planned) == sorted(world.eligible)


def lowest_epoch_left(job: Job) -> int:
    return min(parse_l0_key(k, ROOT).epoch for k in job.left() if parse_l0_key(k, ROOT))  # type: ignore[union-attr]


def test_max_epoch_above_m_needs_its_own_flag_and_force_is_not_it(job: Job, world: World) -> None:
    Controller(job.store, ROOT).create_topic("orders", 1)  # revision 11: M stays 10, offset 11
    with pytest.raises(InvalidArgumentError, match="above the computed M"):
        job.run(max_epoch=M + 1)
    with pytest.raises(InvalidArgumentError, match="--allow-max-epoch-above-m"):
        job.run(max_epoch=M + 1, force=True)
    with pytest.raises(InvalidArgumentError, match="above the cluster epoch"):
        job.run(max_epoch=M + 2, force=True, allow_above_m=True)
    assert job.left() == world.everything
    outcome = job.run(max_epoch=3)
    assert outcome.summary.safe_epoch == 3
    assert lowest_epoch_left(job) == 4
    above = job.run(max_epoch=M + 1, allow_above_m=True)
    assert above.summary.safe_epoch == M + 1
    assert lowest_epoch_left(job) == M + 2


def test_a_pause_stops_the_job_and_a_dry_run_still_runs(job: Job, world: World) -> None:
    pause(job.store, ROOT, by="carol", reason="audit", now=datetime.now(UTC))
    with pytest.raises(EpochGCError, match=r"^paused by carol: audit$"):
        job.run(force=True)
    assert job.left() == world.everything
    dry = job.run(dry_run=True)
    assert dry.summary.eligible == len(world.eligible)


def test_a_pause_between_the_counting_and_the_deleting_stage_stops_the_job(
    job: Job, world: World
) -> None:
    guarded = job.configured(max_delete_fraction=0.9)
    pausing = PauseAfterFirstControlRead(job.store, ROOT, by="dave", reason="stop now")
    with pytest.raises(EpochGCError, match=r"^paused by dave: stop now$"):
        guarded.run(pausing)
    assert pausing.control_reads == 2
    assert job.left() == world.everything


def test_listing_mode_sweeps_every_shard_in_the_bucket(job: Job, world: World) -> None:
    others = [encode_l0_key(ROOT, s, e, str(uuid.uuid4())) for s in (8, 40, 999) for e in (2, 12)]
    foreign = [f"{ROOT}/l0/0040/{2:018d}/{uuid.uuid4()}", f"{ROOT}/l0/x/{2:018d}/{uuid.uuid4()}"]
    seed_objects(job.store.bucket, others + foreign)
    outcome = job.run(listing_tasks=3)
    kept_others = {k for k in others if "/000000000000000012/" in k}
    assert job.left() == set(world.kept) | kept_others | set(foreign)
    assert outcome.summary.deleted == len(world.eligible) + 3


def test_the_delete_fraction_guard_stops_the_job(job: Job, world: World) -> None:
    outcome = job.configured(max_delete_fraction=0.5).run()
    assert outcome.stopped_by_guard is not None and not outcome.summary.success
    assert job.left() == world.everything


def test_run_metrics_arrive_through_a_real_pushgateway(job: Job, world: World) -> None:
    with pushgateway(job.tmp_path) as gateway:
        outcome = job.configured(f'[metrics]\npushgateway = "{gateway}"\n').run()
        text = urllib.request.urlopen(f"http://{gateway}/metrics", timeout=5).read().decode()
    deleted = len(world.eligible)
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
    job: Job, world: World
) -> None:
    """An unreadable controller entry blocks the job before Spark runs, and
    the one line names that entry, word for word as ``gc collect`` does."""
    bad = f"{ROOT}/meta/controller/{M + 1:020d}"
    job.store.put_if_absent(bad, b"garbage")
    with pytest.raises(SafetyBlockedError) as blocked_collect:
        collect_once(
            job.store,
            RequestStats(),
            ROOT,
            CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0),
        )
    with pytest.raises(SafetyBlockedError) as blocked_spark:
        job.run(mode="listing")
    assert str(blocked_spark.value) == str(blocked_collect.value)
    assert f"controller entry {M + 1}:" in str(blocked_spark.value)
    assert job.left() == world.everything
