"""The bucket settings check on a real Ceph RADOS Gateway: a versioned
bucket keeps the bytes of what a collector deletes until a lifecycle rule
expires noncurrent versions, and check-store says so from what RGW answers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from epochgc.storage.client import make_s3_client
from epochgc.storage.keys import encode_l0_key
from tests.rgw.conftest import Gateway
from tests.support.cli import run_cli

CONFIG = "config/local-server.toml"


@pytest.fixture
def versioned(rgw: Gateway) -> Iterator[tuple[Gateway, Any]]:
    s3 = make_s3_client(rgw.settings)
    s3.put_bucket_versioning(Bucket=rgw.bucket, VersioningConfiguration={"Status": "Enabled"})
    yield rgw, s3
    # every version and delete marker, or the bucket cannot be deleted
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=rgw.bucket):
        for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
            s3.delete_object(Bucket=rgw.bucket, Key=entry["Key"], VersionId=entry["VersionId"])


def settings(rgw: Gateway) -> dict[str, dict[str, str]]:
    done = run_cli("check-store", "--json", "--config", CONFIG, env=rgw.env())
    assert "Traceback" not in done.stderr, done.stderr
    return {s["name"]: s for s in json.loads(done.stdout)["bucket_settings"]}


def test_a_versioned_gateway_bucket_warns_until_a_rule_expires_noncurrent_versions(
    versioned: tuple[Gateway, Any],
) -> None:
    rgw, s3 = versioned
    s3.delete_bucket_lifecycle(Bucket=rgw.bucket)  # no rules at all to begin with
    keys = [encode_l0_key("epochgc", 0, 1, str(uuid.uuid4())) for _ in range(2)]
    for key in keys:
        s3.put_object(Bucket=rgw.bucket, Key=key, Body=b"x" * 100)
    s3.delete_objects(Bucket=rgw.bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    found = settings(rgw)
    print(found)  # `make test-rgw` shows it (-rP)
    assert found["versioning"]["severity"] == "warning"
    assert "2 noncurrent versions, 200 bytes, and 2 delete markers" in found["versioning"]["detail"]
    assert found["incomplete multipart uploads"]["severity"] == "warning"
    assert found["object lock"]["severity"] == "ok"

    s3.put_bucket_lifecycle_configuration(
        Bucket=rgw.bucket,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "epochgc-l0",
                    "Status": "Enabled",
                    "Filter": {"Prefix": "epochgc/l0/"},
                    "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
                    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                }
            ]
        },
    )
    assert {s["severity"] for s in settings(rgw).values()} == {"ok"}
