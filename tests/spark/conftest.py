"""One local SparkSession (local[2]) for the whole test session: starting
one costs 8-10 s, so every Spark test shares it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from epochgc.gc.spark.session import build_spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = build_spark_session("local[2]", "epochgc-tests", ui=False)
    try:
        yield session
    finally:
        session.stop()
