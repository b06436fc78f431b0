"""Which executors get the shipped package (``package_to_ship``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.gc.spark import session
from epochgc.gc.spark.package import SparkPackage


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Where the package would have been built (building takes minutes)."""
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    into: list[Path] = []

    def ensure_package(out_dir: Path) -> SparkPackage:
        into.append(out_dir)
        return SparkPackage(
            out_dir / "epochgc.zip", out_dir / "epochgc-env.tar.gz", out_dir / "spark_gc.py"
        )

    monkeypatch.setattr(session, "ensure_package", ensure_package)
    return into


def test_a_cluster_master_gets_the_package_built_in_the_configured_folder(
    built: list[Path],
) -> None:
    package = session.package_to_ship("spark://m:7077", ship=True, package_dir="/tmp/pkg")
    assert package is not None and built == [Path("/tmp/pkg")]
    session.package_to_ship("spark://m:7077", ship=True, package_dir="")
    assert built[-1].parts[-2:] == ("epochgc", "spark"), "the default folder"


@pytest.mark.parametrize(
    ("master", "ship"), [("local[2]", True), ("local", True), ("spark://m:7077", False)]
)
def test_a_local_master_or_ship_false_gets_nothing(
    built: list[Path], master: str, ship: bool
) -> None:
    assert session.package_to_ship(master, ship=ship, package_dir="/tmp/pkg") is None
    assert built == []


def test_under_spark_submit_the_submit_ships_it(
    built: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "4040")
    assert session.package_to_ship("spark://m:7077", ship=True, package_dir="/tmp/pkg") is None
    assert built == []
