"""bench/moto_listing.py: with it, the embedded server answers a LIST that
runs while keys are being deleted (without it such a LIST fails with a 500
whenever a key is deleted between moto copying the key names and reading
the key, which S3 never does)."""

from __future__ import annotations

import threading

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from bench.moto_listing import race_free_listing
from epochgc.storage.embedded import EmbeddedS3
from tests.support.moto_seed import seed_objects


def lists_failed_while_deleting(s3: EmbeddedS3, bucket: str) -> tuple[int, int]:
    """(LISTs answered 5xx, LISTs made) while another thread deletes every key."""
    import boto3  # noqa: PLC0415

    settings = s3.client_settings()
    client = boto3.client(
        "s3",
        endpoint_url=settings.endpoint_url,
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1}, max_pool_connections=4),
    )
    keys = [f"k/{i:06d}" for i in range(10_000)]
    seed_objects(bucket, keys)
    done = threading.Event()

    def delete_all() -> None:
        for i in range(0, len(keys), 200):
            client.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i : i + 200]]}
            )
        done.set()

    deleter = threading.Thread(target=delete_all)
    deleter.start()
    failed = made = 0
    while not done.is_set():
        made += 1
        try:
            client.list_objects_v2(Bucket=bucket, Prefix="k/")
        except ClientError as err:
            assert err.response["ResponseMetadata"]["HTTPStatusCode"] >= 500
            failed += 1
    deleter.join()
    return failed, made


@pytest.mark.serial
def test_a_list_racing_deletes_is_answered() -> None:
    with EmbeddedS3(bucket="race-free") as s3, race_free_listing() as applied:
        assert applied
        failed, made = lists_failed_while_deleting(s3, "race-free")
    assert made > 5
    assert failed == 0, f"{failed} of {made} LISTs failed while keys were deleted"
