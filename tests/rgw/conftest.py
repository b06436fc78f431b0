"""Fixtures for the tests against a real Ceph RADOS Gateway, which only
``make test-rgw`` runs: it starts one with ``scripts/ceph_rgw.sh`` and
exports its endpoint and keys. Elsewhere these tests are skipped, saying
so: the gateway needs root and Debian's Ceph packages, and takes about 15 s
to start, so it is not part of ``make test`` (whose moto-based tests cover
the same logic through a proxy that behaves like RGW)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from epochgc.storage.bucket_settings import ABORT_INCOMPLETE_UPLOADS
from epochgc.storage.client import ClientSettings, make_s3_client
from tests.support.outside_suite import skip_unless_exported
from tests.support.policies import ROLES

ENV_KEYS = ("EPOCHGC_RGW_ENDPOINT", "EPOCHGC_RGW_ACCESS_KEY_ID", "EPOCHGC_RGW_SECRET_ACCESS_KEY")
SKIP_REASON = (
    "needs a running Ceph RADOS Gateway: run `make test-rgw` "
    "(scripts/ceph_rgw.sh starts one and sets EPOCHGC_RGW_*)"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip_unless_exported(items, "tests/rgw/", ENV_KEYS, SKIP_REASON)


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

    def env_as(self, user: RoleUser) -> dict[str, str]:
        """``env()`` with ``user``'s keys instead of the bucket owner's."""
        return {
            **self.env(),
            "EPOCHGC_STORE__ACCESS_KEY_ID": user.access_key_id,
            "EPOCHGC_STORE__SECRET_ACCESS_KEY": user.secret_access_key,
        }

    def settings_as(self, user: RoleUser) -> ClientSettings:
        return dataclasses.replace(
            self.settings,
            access_key_id=user.access_key_id,
            secret_access_key=user.secret_access_key,
        )


@dataclass(frozen=True)
class RoleUser:
    """An RGW user made for one role of docs/policies/."""

    role: str
    uid: str
    access_key_id: str
    secret_access_key: str


@pytest.fixture(scope="session")
def role_users() -> dict[str, RoleUser]:
    """One RGW user per documented role (made with radosgw-admin, owning no
    bucket: its rights come from the bucket policy a test applies)."""
    conf = os.environ.get("EPOCHGC_RGW_CEPH_CONF", "")
    if not conf or shutil.which("radosgw-admin") is None:
        pytest.skip(
            "needs radosgw-admin and EPOCHGC_RGW_CEPH_CONF (printed by scripts/ceph_rgw.sh)"
        )
    users = {}
    for role in ROLES:
        user = RoleUser(role, f"epochgc-{role}", f"epochgc-{role}-access", f"epochgc-{role}-secret")
        admin = ["radosgw-admin", "-c", conf, "user"]
        if subprocess.run(
            [*admin, "info", f"--uid={user.uid}"], capture_output=True, check=False
        ).returncode:
            subprocess.run(
                [
                    *admin,
                    "create",
                    f"--uid={user.uid}",
                    f"--display-name={user.uid}",
                    f"--access-key={user.access_key_id}",
                    f"--secret={user.secret_access_key}",
                ],
                capture_output=True,
                check=True,
            )
        users[role] = user
    return users


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
    # Set up as docs/operating.md ("Bucket settings") recommends, so that
    # check-store and the daemon's start find nothing to warn about.
    client.put_bucket_lifecycle_configuration(
        Bucket=name, LifecycleConfiguration={"Rules": [ABORT_INCOMPLETE_UPLOADS]}
    )
    yield Gateway(rgw_settings, name)
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=name):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=name, Delete={"Objects": keys})
    client.delete_bucket(Bucket=name)
