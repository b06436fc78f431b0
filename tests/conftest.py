"""Shared fixtures: one embedded S3 server (moto's server mode on 127.0.0.1,
a free port) for the whole test session, a fresh bucket per test, and
stores that talk to it over HTTP through boto3."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from hypothesis import settings

from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.retry import RetryPolicy
from epochgc.storage.s3 import S3ObjectStore

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
