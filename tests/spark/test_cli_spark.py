"""``epochgc inventory build`` and ``epochgc gc spark`` as an operator runs
them (separate processes, their own Spark driver)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.support.cli import run_cli
from tests.support.config_files import write_gc_config
from tests.support.moto_seed import seed_objects


def test_build_an_inventory_then_delete_from_it(
    tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    Controller(store, "epochgc").advance_to(5)
    keys = [encode_l0_key("epochgc", s, e, str(uuid.uuid4())) for s in range(4) for e in (4, 5, 6)]
    seed_objects(bucket, keys)
    config = write_gc_config(tmp_path / "spark.toml", s3_server.endpoint_url, bucket, shards=4)
    built = run_cli("inventory", "build", "--format", "csv", "--config", str(config), "--json")
    assert built.returncode == 0, built.stderr
    manifest = json.loads(built.stdout)["manifest"]
    assert manifest.startswith(f"inventory/{bucket}/epochgc-l0/") and manifest.endswith(
        "/manifest.json"
    )
    done = run_cli(
        "gc",
        "spark",
        "--mode",
        "inventory",
        "--master",
        "local[1]",
        "--config",
        str(config),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["engine"] == "spark-inventory" and summary["deleted"] == 8
    assert summary["manifest"] == manifest
    seconds = summary["seconds"]
    assert list(seconds) == [
        "spark_start",
        "safe_epoch",
        "plan",
        "delete",
        "summary",
        "spark_stop",
        "total",
    ], "where the time went, in order (no package step on a local master)"
    assert sum(v for k, v in seconds.items() if k != "total") <= seconds["total"]
    assert "spark task 0" in done.stderr, "each task logs a line when it finishes"
    left = {o.key for o in store.list_objects("epochgc/l0/")}
    assert left == {k for k in keys if "/000000000000000006/" in k}


def test_gc_spark_refuses_while_paused_and_takes_m_above_the_computed_only_by_its_flag(
    tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    controller = Controller(store, "epochgc")
    controller.advance_to(5)
    controller.create_topic("orders", 1)  # revision 6, no reports: M stays 5, offset 6
    keys = [encode_l0_key("epochgc", s, e, str(uuid.uuid4())) for s in range(2) for e in (5, 6)]
    seed_objects(bucket, keys)
    config = write_gc_config(tmp_path / "spark.toml", s3_server.endpoint_url, bucket, shards=2)
    assert run_cli("gc", "pause", "--reason", "audit", "--config", str(config)).returncode == 0
    refused = run_cli("gc", "spark", "--force", "--master", "local[1]", "--config", str(config))
    assert refused.returncode == 1 and "paused by " in refused.stderr, refused.stderr
    assert refused.stderr.rstrip().endswith(": audit") and "Traceback" not in refused.stderr
    dry = run_cli(
        "gc",
        "spark",
        "--dry-run",
        "--max-epoch",
        "6",
        "--allow-max-epoch-above-m",
        "--master",
        "local[1]",
        "--config",
        str(config),
        env={"EPOCHGC_SPARK__LISTING_TASKS": "1"},  # one task: its words are singular
    )
    assert dry.returncode == 0, dry.stderr
    line, plan, time = dry.stdout.strip().splitlines()
    assert "dry run" in line and "M=6 " in line and "eligible 4, deleted 0 " in line, line
    assert ", 1 task)" in line, line
    assert plan.startswith("plan: ")
    assert re.fullmatch(
        r"time: spark start \d+\.\ds, safe epoch \d+\.\ds \(M=6\), "
        r"plan \d+\.\ds \(2 L0 shards in 1 group\), dry run \d+\.\ds \(.+\), "
        r"summary \d+\.\ds, spark stop \d+\.\ds; total \d+\.\ds",
        time,
    ), time
    assert {o.key for o in store.list_objects("epochgc/l0/")} == set(keys)
