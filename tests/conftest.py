"""Shared fixtures: one embedded S3 server (moto's server mode on 127.0.0.1,
a free port) for the whole test session, a fresh bucket per test, and
stores that talk to it over HTTP through boto3."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
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

SPARK_FIXTURES = frozenset({"spark", "spark_cluster", "spark_cache_home", "spark_package_dir"})
"""Fixtures that hold a Spark session, a standalone cluster or the shared
executors' environment cache."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that share an expensive fixture go to one worker when the
    suite runs in parallel (``make test`` runs ``pytest -n 2 --dist
    loadgroup``): every test that uses Spark (one SparkSession and one
    standalone cluster per run, as on one process, and one writer of the
    executors' environment cache), and the SPIN models (their module
    fixture runs every model once).

    ``tryfirst``: pytest-xdist turns the marker into the test's group in
    its own hook of this name, which ran before this one otherwise, so no
    test had a group and each worker started its own SparkSession, its own
    cluster and its own run of every model."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & SPARK_FIXTURES or "spark" in item.path.parts:
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif "model" in item.path.parts:
            item.add_marker(pytest.mark.xdist_group("model"))


@pytest.fixture(scope="session", autouse=True)
def groups_took(request: pytest.FixtureRequest) -> None:
    """Refuse to run a parallel suite whose groups did not take: nothing
    fails then, the shared set-ups just run once per worker, and the
    suite's time grows by minutes unnoticed. pytest-xdist 3.8 groups by a
    suffix on each test's id, which pytest 9.2 no longer lets it add
    (pyproject.toml keeps pytest below 9.2 for that reason). Autouse and
    session-wide, so it fails every test before any shared set-up starts."""
    if not getattr(request.config.option, "loadgroup", False):
        return  # not a worker of ``--dist loadgroup``
    for item in request.session.items:
        marker = item.get_closest_marker("xdist_group")
        if marker is not None and not item.nodeid.endswith(f"@{marker.args[0]}"):
            pytest.fail(
                f"--dist loadgroup put no group on {item.nodeid}: this pytest-xdist "
                "cannot group tests under this pytest (groups_took in tests/conftest.py)",
                pytrace=False,
            )


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


SPARK_CACHE_HOME = Path(tempfile.gettempdir()) / "epochgc-tests-cache-home"
"""The ``XDG_CACHE_HOME`` of the Spark package tests: its shared environment
cache (boto3 + pyarrow, about 10-25 s to build) outlives a test run, so the
environment is built once per machine, not once per run."""


@pytest.fixture(scope="session")
def spark_cache_home() -> Path:
    """``SPARK_CACHE_HOME``, whose cache holds an up-to-date executors'
    environment: ``epochgc spark package`` and ``gc spark`` build into and
    reuse from ``$XDG_CACHE_HOME/epochgc/`` (give it to a subprocess as
    ``XDG_CACHE_HOME``)."""
    from epochgc.gc.spark.package import default_package_dir, ensure_package  # noqa: PLC0415

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(SPARK_CACHE_HOME))
        ensure_package(default_package_dir())
    return SPARK_CACHE_HOME


@pytest.fixture(scope="session")
def spark_package_dir(tmp_path_factory: pytest.TempPathFactory, spark_cache_home: Path) -> Path:
    """A folder with this session's executors' package (``epochgc spark
    package``): the code zip is built fresh, the packed environment comes
    from ``spark_cache_home``'s cache."""
    from epochgc.gc.spark.package import ensure_package  # noqa: PLC0415

    folder = tmp_path_factory.mktemp("spark-package")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(spark_cache_home))
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
