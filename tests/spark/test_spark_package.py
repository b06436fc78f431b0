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
from pathlib import Path

import pytest

from epochgc.gc.spark.package import ENVIRONMENT_ARCHIVE, ENVIRONMENT_PINS
from epochgc.gc.spark.session import package_to_ship
from tests.support.cli import run_cli

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
