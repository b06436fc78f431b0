"""An environment where the AWS credential chain finds nothing, for tests of
what epochgc says when no credentials are configured; and the embedded S3's
key pair at an endpoint where no S3 answers, for tests of what it says then."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.storage.client import ClientSettings
from epochgc.storage.embedded import EMBEDDED_ACCESS_KEY, EMBEDDED_SECRET_KEY

_CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


def clear_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Remove every credential source from this process's environment (and
    so from the CLI subprocesses it starts): no variables, empty config and
    credentials files, no instance-metadata lookup (which would wait)."""
    empty = tmp_path / "empty-aws-file"
    empty.write_text("")
    for name in _CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def embedded_keys_at(endpoint_url: str) -> ClientSettings:
    """Client settings with the embedded S3's key pair, at ``endpoint_url``."""
    return ClientSettings(
        endpoint_url=endpoint_url,
        access_key_id=EMBEDDED_ACCESS_KEY,
        secret_access_key=EMBEDDED_SECRET_KEY,
    )
