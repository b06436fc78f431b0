"""Building the boto3 S3 client: the one place botocore is configured.

botocore's own retries are off (``total_max_attempts = 1``) because epochgc
retries in exactly one layer, ``storage.s3``, where attempts are counted and
the clock is injectable. Credentials come from the standard AWS chain unless
the configuration names a static pair (for S3-compatible stores); they are
never logged.

Every client reads the timestamps in its responses with
``storage.timestamps.parse_timestamp`` (a fast path for S3's UTC ISO times,
botocore's own reader for the rest), installed on the client's own botocore
session: the same ``response_parser_factory`` hook aws-cli uses, and never
botocore's module-wide default, so clients other code builds in the same
process are left as they were.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config

from epochgc.storage.timestamps import parse_timestamp

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


@dataclass(frozen=True)
class ClientSettings:
    """How to reach the object store.

    Attributes:
        endpoint_url: ``None`` for AWS, else an S3-compatible endpoint.
        region: the bucket's region.
        access_key_id / secret_access_key: a static credential pair, or
            ``None`` for the default AWS credential chain.
        addressing_style: ``path`` for most S3-compatible stores.
        connect_timeout_seconds / read_timeout_seconds: per HTTP attempt.
        max_pool_connections: HTTP connections kept per client; at least the
            number of requests a process keeps in flight.
    """

    endpoint_url: str | None = None
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    addressing_style: Literal["auto", "path", "virtual"] = "auto"
    connect_timeout_seconds: float = 5.0
    read_timeout_seconds: float = 30.0
    max_pool_connections: int = 32


def make_s3_client(settings: ClientSettings) -> S3Client:
    """A boto3 S3 client with epochgc's transport settings."""
    config = Config(
        region_name=settings.region,
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=settings.connect_timeout_seconds,
        read_timeout=settings.read_timeout_seconds,
        max_pool_connections=settings.max_pool_connections,
        s3={"addressing_style": settings.addressing_style},
        # Checksums on every request would make moto and many S3-compatible
        # stores reject DeleteObjects; only send them where S3 requires one.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    session = boto3.session.Session(
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        region_name=settings.region,
        botocore_session=botocore_session_with_fast_timestamps(),
    )
    client: S3Client = session.client("s3", endpoint_url=settings.endpoint_url, config=config)
    return client


def botocore_session_with_fast_timestamps() -> botocore.session.Session:
    """A new botocore session whose clients read timestamps with
    ``storage.timestamps.parse_timestamp``.

    Why on a session of our own: a LIST page of 1000 keys spent about half
    its client CPU in botocore's dateutil-based reader (issue 28; see
    ``bench/bench_list_parse.py``). The response parser factory is a
    per-session component, read by every client the session builds, so
    setting it here changes epochgc's clients and no one else's.
    """
    session = botocore.session.get_session()
    factory = session.get_component("response_parser_factory")
    factory.set_parser_defaults(timestamp_parser=parse_timestamp)
    data_path = session.get_config_variable("data_path")
    session.register_component("data_loader", _shared_data_loader(data_path))
    return session


@functools.cache
def _shared_data_loader(data_path: str | None) -> botocore.loaders.Loader:
    """One loader of botocore's service models per search path
    (``AWS_DATA_PATH``) for every session of this process. Each new session
    otherwise reads and parses S3's model files again: about half of the
    0.2 s a client took to build, paid by every Spark task and test that
    builds one. The loader only reads files and caches what it parsed; no
    credentials or settings live in it."""
    return botocore.loaders.create_loader(data_path)
