"""Fixtures for the tests against a real Ceph RADOS Gateway, which only
``make test-rgw`` runs: it starts one with ``scripts/ceph_rgw.sh`` and
exports its endpoint and keys. Elsewhere these tests are skipped, saying
so: the gateway needs root and Debian's Ceph packages, and takes about 15 s
to start, so it is not part of ``make test`` (whose moto-based tests cover
the same logic through a proxy that behaves like RGW)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from epochgc.storage.client import ClientSettings, make_s3_client

ENV_KEYS = ("EPOCHGC_RGW_ENDPOINT", "EPOCHGC_RGW_ACCESS_KEY_ID", "EPOCHGC_RGW_SECRET_ACCESS_KEY")
SKIP_REASON = (
    "needs a running Ceph RADOS Gateway: run `make test-rgw` "
    "(scripts/ceph_rgw.sh starts one and sets EPOCHGC_RGW_*)"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if all(os.environ.get(k) for k in ENV_KEYS):
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if "tests/rgw/" in item.nodeid:
            item.add_marker(skip)


@dataclass(frozen=True)
class Gateway:
    """Where the gateway is, and a bucket made for this test."""

    settings: ClientSettings
    bucket: str

    def env(self) -> dict[str, str]:
        """The overrides that point an ``epochgc`` process at the bucket."""
        return {
            "EPOCHGC_STORE__ENDPOINT_URL": self.settings.endpoint_url or "",
            "EPOCHGC_STORE__BUCKET": self.bucket,
            "EPOCHGC_STORE__ACCESS_KEY_ID": self.settings.access_key_id or "",
            "EPOCHGC_STORE__SECRET_ACCESS_KEY": self.settings.secret_access_key or "",
        }


@pytest.fixture(scope="session")
def rgw_settings() -> ClientSettings:
    return ClientSettings(
        endpoint_url=os.environ["EPOCHGC_RGW_ENDPOINT"],
        access_key_id=os.environ["EPOCHGC_RGW_ACCESS_KEY_ID"],
        secret_access_key=os.environ["EPOCHGC_RGW_SECRET_ACCESS_KEY"],
        addressing_style="path",
    )


@pytest.fixture
def rgw(rgw_settings: ClientSettings) -> Iterator[Gateway]:
    client = make_s3_client(rgw_settings)
    name = f"epochgc-t-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    yield Gateway(rgw_settings, name)
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=name):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=name, Delete={"Objects": keys})
    client.delete_bucket(Bucket=name)
