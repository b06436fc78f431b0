"""Shared fixtures: one embedded S3 server (moto's server mode on 127.0.0.1,
a free port) for the whole test session, a fresh bucket per test, and
stores that talk to it over HTTP through boto3."""

from __future__ import annotations

import fcntl
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.retry import RetryPolicy
from epochgc.storage.s3 import S3ObjectStore
from tests.support.spark_cluster import StandaloneCluster

# Timing is not what these properties are about, and CI machines are shared:
# a slow example must not fail a run (speed is measured in bench/).
settings.register_profile("epochgc", deadline=None)
settings.load_profile("epochgc")

FAST_RETRIES = RetryPolicy(max_attempts=5, base_delay_seconds=0.001, max_delay_seconds=0.01)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[EmbeddedS3]:
    server = EmbeddedS3()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bucket(s3_server: EmbeddedS3) -> str:
    name = f"t-{uuid.uuid4().hex[:16]}"
    s3_server.create_bucket(name)
    return name


@pytest.fixture
def s3_client(s3_server: EmbeddedS3):  # type: ignore[no-untyped-def]
    return make_s3_client(s3_server.client_settings())


@pytest.fixture
def store(s3_client, bucket: str) -> S3ObjectStore:  # type: ignore[no-untyped-def]
    return S3ObjectStore(s3_client, bucket, retry_policy=FAST_RETRIES)


@pytest.fixture(scope="session")
def spark_package_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with this session's executors' package (``epochgc spark
    package``): the code zip is built fresh; the packed environment (boto3 +
    pyarrow, about 10 s to build) is built once into a cache shared by test
    runs and hard-linked in."""
    from epochgc.gc.spark.package import ENVIRONMENT_ARCHIVE, ENVIRONMENT_PINS, ensure_package  # noqa: PLC0415

    cache = Path(tempfile.gettempdir()) / "epochgc-tests-spark-env"
    with _file_lock(cache.with_suffix(".lock")):
        ensure_package(cache)
    folder = tmp_path_factory.mktemp("spark-package")
    for name in (ENVIRONMENT_ARCHIVE, ENVIRONMENT_PINS):
        os.link(cache / name, folder / name)
    ensure_package(folder)
    return folder


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """One Spark standalone cluster (a master, two bare workers) for the
    session; see ``tests/support/spark_cluster.py``."""
    for attempt in range(3):
        # Free ports are picked, then bound by the JVMs: on a busy machine
        # another process may take one in between; start again on new ones.
        cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
        try:
            cluster.start()
            break
        except RuntimeError:
            cluster.stop()
            if attempt == 2:
                raise
    try:
        yield cluster
    finally:
        cluster.stop()


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialise test sessions building the shared environment cache."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
