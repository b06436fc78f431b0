"""The clients ``make_s3_client`` builds read response timestamps with
``storage.timestamps.parse_timestamp``, over HTTP against the embedded S3,
and give the same times a stock boto3 client gives; a stock client built
afterwards in the same process still reads them with botocore's default."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import boto3
import botocore.parsers
import botocore.utils
from botocore.config import Config

from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.retry import RetryPolicy
from epochgc.storage.s3 import S3ObjectStore
from epochgc.storage.timestamps import parse_timestamp

KEYS = [f"epochgc/l0/{shard:03d}/part-{n:05d}.parquet" for shard in range(3) for n in range(4)]


def stock_client(s3_server: EmbeddedS3) -> Any:
    """A plain ``boto3.client("s3")`` at the embedded server: boto3's own
    default session, nothing of epochgc's."""
    settings = s3_server.client_settings()
    return boto3.client(
        "s3",
        endpoint_url=settings.endpoint_url,
        region_name=settings.region,
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        config=Config(s3={"addressing_style": "path"}),
    )


def timestamp_parser_of(client: Any) -> Any:
    """The timestamp parser ``client`` parses its HTTP responses with
    (botocore internals: the endpoint's parser factory makes one parser
    per response)."""
    return client._endpoint._response_parser_factory.create_parser("rest-xml")._timestamp_parser


def test_listing_times_match_a_stock_client_and_stay_ours(
    s3_server: EmbeddedS3, bucket: str
) -> None:
    ours = make_s3_client(s3_server.client_settings())
    for key in KEYS:
        ours.put_object(Bucket=bucket, Key=key, Body=b"x")
    stock = stock_client(s3_server)  # built after ours, in the same process

    our_page = ours.list_objects_v2(Bucket=bucket, Prefix="epochgc/l0/")
    stock_page = stock.list_objects_v2(Bucket=bucket, Prefix="epochgc/l0/")
    our_times = [(o["Key"], o["LastModified"]) for o in our_page["Contents"]]
    stock_times = [(o["Key"], o["LastModified"]) for o in stock_page["Contents"]]
    assert [k for k, _ in our_times] == sorted(KEYS)
    assert our_times == stock_times

    # Ours came through the fast path (the stdlib UTC zone); the stock
    # client's through dateutil (a dateutil zone): only ours is installed.
    assert all(t.tzinfo is UTC for _, t in our_times)
    assert all(t.utcoffset().total_seconds() == 0 for _, t in stock_times)  # type: ignore[union-attr]
    assert not any(t.tzinfo is UTC for _, t in stock_times)
    assert timestamp_parser_of(ours) is parse_timestamp
    assert timestamp_parser_of(stock) is botocore.utils.parse_timestamp
    assert botocore.parsers.DEFAULT_TIMESTAMP_PARSER is botocore.utils.parse_timestamp


def test_header_times_match_a_stock_client(s3_server: EmbeddedS3, bucket: str) -> None:
    """Last-Modified in HeadObject and GetObject headers is an HTTP date:
    it takes botocore's own reader, and the answers agree."""
    ours = make_s3_client(s3_server.client_settings())
    ours.put_object(Bucket=bucket, Key=KEYS[0], Body=b"x")
    stock = stock_client(s3_server)
    assert (
        ours.head_object(Bucket=bucket, Key=KEYS[0])["LastModified"]
        == stock.head_object(Bucket=bucket, Key=KEYS[0])["LastModified"]
    )
    assert (
        ours.get_object(Bucket=bucket, Key=KEYS[0])["LastModified"]
        == stock.get_object(Bucket=bucket, Key=KEYS[0])["LastModified"]
    )


def test_store_listing_gives_the_stock_clients_times(s3_server: EmbeddedS3, bucket: str) -> None:
    store = S3ObjectStore(
        make_s3_client(s3_server.client_settings()), bucket, retry_policy=RetryPolicy()
    )
    for key in KEYS:
        store.put(key, b"x")
    stock_page = stock_client(s3_server).list_objects_v2(Bucket=bucket, Prefix="epochgc/")
    expected = {o["Key"]: o["LastModified"] for o in stock_page["Contents"]}
    listed = {o.key: o.last_modified for o in store.list_objects("epochgc/")}
    assert listed == expected
