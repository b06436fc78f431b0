"""The bucket settings that defeat a collector, read from the embedded S3
(moto over HTTP) by ``check-store`` and by the daemon's start."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from epochgc.storage.bucket_settings import Severity, assess_bucket_settings, read_bucket_settings
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key
from epochgc.storage.s3 import S3ObjectStore
from tests.conftest import FAST_RETRIES
from tests.support.cli import run_cli
from tests.support.config_files import write_server_config

ROOT = "epochgc"


def bare_bucket(client: Any, **create: Any) -> str:
    """A bucket made without the embedded server's recommended rule."""
    name = f"t-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=name, **create)
    return name


def set_rules(client: Any, bucket: str, *rules: dict[str, Any]) -> None:
    client.put_bucket_lifecycle_configuration(
        Bucket=bucket, LifecycleConfiguration={"Rules": list(rules)}
    )


def check_store(tmp_path: Path, server: EmbeddedS3, bucket: str) -> tuple[int, dict[str, Any]]:
    config = write_server_config(tmp_path / "c.toml", server.endpoint_url, bucket)
    done = run_cli("check-store", "--config", str(config), "--json")
    report = json.loads(done.stdout)
    return done.returncode, {s["name"]: s for s in report["bucket_settings"]}


def test_a_versioned_bucket_without_a_noncurrent_rule_warns_with_the_bytes_left(
    s3_server: EmbeddedS3, s3_client: Any, tmp_path: Path
) -> None:
    bucket = bare_bucket(s3_client)
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    store = S3ObjectStore(s3_client, bucket, retry_policy=FAST_RETRIES)
    keys = [encode_l0_key(ROOT, 0, 1, str(uuid.uuid4())) for _ in range(3)]
    for key in keys:
        store.put(key, b"x" * 1000)
    store.delete_many(keys)  # as a sweep does: three delete markers, the bytes stay
    assert list(store.list_objects(f"{ROOT}/l0/")) == []
    rc, found = check_store(tmp_path, s3_server, bucket)
    assert rc == 0, "a warning does not fail the check"
    versioning = found["versioning"]
    assert versioning["severity"] == "warning"
    assert "3 noncurrent versions, 2.9 KiB, and 3 delete markers" in versioning["detail"]
    assert found["incomplete multipart uploads"]["severity"] == "warning"

    set_rules(
        s3_client,
        bucket,
        {
            "ID": "l0",
            "Status": "Enabled",
            "Filter": {"Prefix": f"{ROOT}/l0/"},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        },
    )
    rc, found = check_store(tmp_path, s3_server, bucket)
    assert rc == 0 and {s["severity"] for s in found.values()} == {"ok"}


def test_a_bucket_without_rules_warns_only_of_incomplete_uploads(
    s3_client: Any, store: S3ObjectStore
) -> None:
    bucket = bare_bucket(s3_client)
    bare = S3ObjectStore(s3_client, bucket, retry_policy=FAST_RETRIES)
    found = {
        f.name: f.severity for f in assess_bucket_settings(read_bucket_settings(bare, ROOT), ROOT)
    }
    assert found == {
        "versioning": Severity.OK,
        "incomplete multipart uploads": Severity.WARNING,
        "object lock": Severity.OK,
    }
    # the embedded server makes its buckets the recommended way
    made = assess_bucket_settings(read_bucket_settings(store, ROOT), ROOT)
    assert {f.severity for f in made} == {Severity.OK}


def test_object_lock_fails_check_store_and_stops_the_daemon_before_any_round(
    s3_server: EmbeddedS3, s3_client: Any, tmp_path: Path
) -> None:
    bucket = bare_bucket(s3_client, ObjectLockEnabledForBucket=True)
    s3_client.put_object_lock_configuration(
        Bucket=bucket,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}},
        },
    )
    rc, found = check_store(tmp_path, s3_server, bucket)
    assert rc == 1 and found["object lock"]["severity"] == "error"
    config = write_server_config(tmp_path / "d.toml", s3_server.endpoint_url, bucket)
    done = run_cli("daemon", "--config", str(config), "--duration", "30")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert "object lock enabled with a default retention (GOVERNANCE, 1 day)" in lines[-1]
    assert "Traceback" not in done.stderr
    assert not list(S3ObjectStore(s3_client, bucket).list_objects(f"{ROOT}/gc/runs/"))
