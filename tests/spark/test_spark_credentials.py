"""The store credentials never ride inside the pickled tasks: the job's
Python functions, as PySpark serializes them for the executors, hold no
secret, and the tasks still reach the store (through the executors'
environment, ``gc/spark/credentials.py``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.core import rdd as pyspark_rdd

from epochgc.config import load_config
from epochgc.errors import InvalidArgumentError
from epochgc.gc.spark.credentials import hand_over, without_secrets
from epochgc.gc.spark.job import SparkRunOptions, run_spark_gc
from epochgc.storage.client import ClientSettings
from epochgc.storage.embedded import EMBEDDED_ACCESS_KEY, EMBEDDED_SECRET_KEY, EmbeddedS3
from epochgc.storage.keys import encode_l0_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.wiring.settings import client_settings_of, spark_gc_settings_of
from tests.support.config_files import write_gc_config
from tests.support.moto_seed import seed_objects


def test_the_pickled_tasks_carry_no_secret_and_still_reach_the_store(
    spark: Any,
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Controller(store, "epochgc").advance_to(5)
    keys = [encode_l0_key("epochgc", s, e, str(uuid.uuid4())) for s in range(2) for e in (5, 6)]
    seed_objects(bucket, keys)
    config = load_config(
        write_gc_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket, shards=2)
    )
    pickled: list[bytes] = []
    real = pyspark_rdd._prepare_for_python_RDD

    def recording(sc: Any, command: Any) -> Any:
        prepared = real(sc, command)
        pickled.append(prepared[0])
        return prepared

    monkeypatch.setattr(pyspark_rdd, "_prepare_for_python_RDD", recording)
    outcome = run_spark_gc(
        spark,
        spark_gc_settings_of(config),
        store,
        RequestStats(),
        client_settings_of(config, s3_server.endpoint_url),
        SparkRunOptions(),
    )
    assert (outcome.summary.deleted, outcome.summary.errors) == (2, 0)
    assert pickled, "the job serialized its tasks"
    for command in pickled:
        assert EMBEDDED_SECRET_KEY.encode() not in command
        assert EMBEDDED_ACCESS_KEY.encode() not in command


def test_without_secrets_keeps_the_address_and_drops_the_pair() -> None:
    settings = ClientSettings("http://127.0.0.1:9000", "eu-west-1", "AKIA1", "s3cr3t", "path")
    stripped = without_secrets(settings)
    assert (stripped.access_key_id, stripped.secret_access_key) == (None, None)
    assert (stripped.endpoint_url, stripped.region, stripped.addressing_style) == (
        "http://127.0.0.1:9000",
        "eu-west-1",
        "path",
    )


class _Context:
    def __init__(self) -> None:
        self.environment: dict[str, str] = {"PYTHONHASHSEED": "0"}


class _Session:
    """Test-only: the one attribute ``hand_over`` touches."""

    def __init__(self) -> None:
        self.sparkContext = _Context()


def test_hand_over_puts_the_drivers_credentials_in_the_executor_environment() -> None:
    session = _Session()
    hand_over(session, ClientSettings(access_key_id="AKIA1", secret_access_key="s3cr3t"), "driver")
    assert session.sparkContext.environment == {
        "PYTHONHASHSEED": "0",
        "AWS_ACCESS_KEY_ID": "AKIA1",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
    }


def test_executor_mode_hands_nothing_over_and_refuses_a_static_pair() -> None:
    session = _Session()
    session.sparkContext.environment["AWS_SECRET_ACCESS_KEY"] = "from-an-earlier-run"
    hand_over(session, ClientSettings(), "executor")
    assert session.sparkContext.environment == {"PYTHONHASHSEED": "0"}
    with pytest.raises(InvalidArgumentError, match="executors would not use that key pair"):
        hand_over(session, ClientSettings(access_key_id="AKIA1", secret_access_key="x"), "executor")
