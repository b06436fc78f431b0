"""One build of the executors' environment serves every folder that needs
it: ``epochgc spark package --out DIR`` into any folder and ``gc spark``'s
own package step on a cluster master reuse the archive built once into the
shared cache while the pinned packages are unchanged. (A ``gc spark
--master spark://...`` spent 24 s of 92 rebuilding the environment in
``~/.cache/epochgc/spark`` a minute after ``make spark-package`` had built
one into ``dist/spark``.)

The environment comes from ``spark_cache_home`` (built there once per
machine); nothing here may build another.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from epochgc.gc.spark.package import ENVIRONMENT_ARCHIVE, ENVIRONMENT_PINS
from epochgc.gc.spark.session import package_to_ship
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.support.cli import run_cli
from tests.support.config_files import write_gc_config
from tests.support.moto_seed import seed_objects

BUILDING = "building the executors' environment"


def _package(out: Path, cache_home: Path) -> dict[str, str]:
    """``epochgc spark package --out out`` as an operator runs it, with
    ``cache_home`` as ``XDG_CACHE_HOME``; its JSON output."""
    done = run_cli(
        "spark", "package", "--out", str(out), "--json", env={"XDG_CACHE_HOME": str(cache_home)}
    )
    assert done.returncode == 0, done.stderr
    assert BUILDING not in done.stderr, "the environment was built again"
    shown: dict[str, str] = json.loads(done.stdout)
    return shown


def test_two_package_folders_and_gc_sparks_package_step_share_one_built_environment(
    tmp_path: Path,
    spark_cache_home: Path,
    spark_package_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    built = spark_package_dir / ENVIRONMENT_ARCHIVE
    before = built.stat().st_mtime_ns
    for folder in ("dist-a", "dist-b"):
        shown = _package(tmp_path / folder, spark_cache_home)
        assert Path(shown["environment"]).samefile(built), f"{folder} has an archive of its own"
        assert shown["environment_step"] == "reused from the cache"
        assert (tmp_path / folder / ENVIRONMENT_PINS).read_text() == (
            spark_package_dir / ENVIRONMENT_PINS
        ).read_text()
    monkeypatch.setenv("XDG_CACHE_HOME", str(spark_cache_home))
    with caplog.at_level(logging.INFO, "epochgc.gc.spark.package"):
        shipped = package_to_ship("spark://127.0.0.1:7077", ship=True, package_dir=None)
    assert shipped is not None and shipped.environment.samefile(built)
    assert BUILDING not in caplog.text
    assert built.stat().st_mtime_ns == before, "the shared archive was rewritten"


def test_the_line_printed_for_a_local_master_runs_as_printed(
    tmp_path: Path,
    spark_cache_home: Path,
    spark_package_dir: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    bucket: str,
) -> None:
    # For local[2] the printed spark-submit line used to fail after 15 s
    # with 90 lines of Java ('Cannot run program "./environment/bin/python"':
    # a local master unpacks no --archives). Local workers run the driver's
    # own Python, so the line for a local master ships no environment and
    # says so in one line.
    Controller(store, "epochgc").advance_to(5)
    keys = [encode_l0_key("epochgc", s, e, str(uuid.uuid4())) for s in range(2) for e in (4, 6)]
    seed_objects(bucket, keys)
    config = write_gc_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket, shards=2)
    out = tmp_path / "package"
    made = run_cli(
        "spark", "package", "--out", str(out), "--master", "local[2]", "--config", str(config),
        env={"XDG_CACHE_HOME": str(spark_cache_home)},
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    lines = made.stdout.strip().splitlines()
    printed = lines[-1]
    assert printed.startswith("spark-submit ") and "--archives" not in printed, printed
    assert any("local master" in line and "no packed environment" in line for line in lines)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    done = subprocess.run(
        shlex.split(printed), env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    left = {o.key for o in store.list_objects("epochgc/l0/")}
    assert left == {k for k in keys if "/000000000000000006/" in k}
