"""Store errors are classified once, in ``storage/``: permanent ones (no such
bucket, access denied, bad or missing credentials, unknown endpoint host) are
raised at once, never retried, with a one-line message naming the cause;
transient ones (5xx, SlowDown, refused connections) are retried and then
surface as ``RetriesExhaustedError``, a ``TransientStorageError``.

Each class is produced by the embedded S3 itself where it can (a missing
bucket, a closed port, an unresolvable host, a client without credentials)
and by the HTTP error injector where moto cannot (it checks no signatures).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from epochgc.errors import (
    AccessDeniedError,
    BucketMissingError,
    CredentialsError,
    EndpointError,
    PermanentStorageError,
    RetriesExhaustedError,
    TransientStorageError,
)
from epochgc.storage.client import ClientSettings, make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.retry import RetryPolicy
from epochgc.storage.s3 import S3ObjectStore
from tests.support.aws_env import clear_aws_credentials, embedded_keys_at
from tests.support.faults import inject_http_errors

RETRIES = RetryPolicy(max_attempts=4, base_delay_seconds=0.001, max_delay_seconds=0.002)


class AttemptCounter:
    """Counts API calls made through a client (one per attempt of our retry
    layer; botocore's own retries are off)."""

    def __init__(self, client: Any) -> None:
        self.calls = 0
        client.meta.events.register("before-call.s3", self._count)

    def _count(self, **_kwargs: Any) -> None:
        self.calls += 1


def _store(settings: ClientSettings, bucket: str) -> tuple[S3ObjectStore, AttemptCounter]:
    client = make_s3_client(settings)
    return S3ObjectStore(client, bucket, retry_policy=RETRIES), AttemptCounter(client)


def test_a_missing_bucket_is_permanent_and_not_a_missing_key(s3_server: EmbeddedS3) -> None:
    store, attempts = _store(s3_server.client_settings(), "no-such-bucket-here")
    with pytest.raises(BucketMissingError) as info:
        store.get("epochgc/meta/controller/snapshot")
    assert attempts.calls == 1, "a missing bucket is never retried"
    message = str(info.value)
    assert "no-such-bucket-here" in message and "does not exist" in message
    assert "\n" not in message
    with pytest.raises(BucketMissingError):
        list(store.list_objects("epochgc/"))


def test_an_unknown_endpoint_host_is_permanent() -> None:
    settings = embedded_keys_at("http://no-such-host.invalid:1")
    store, attempts = _store(settings, "b-x")
    with pytest.raises(EndpointError, match=r"no-such-host\.invalid") as info:
        store.get("k")
    assert attempts.calls == 1
    assert isinstance(info.value, PermanentStorageError)


def test_a_refused_connection_is_transient_and_retried() -> None:
    settings = embedded_keys_at("http://127.0.0.1:1")
    store, attempts = _store(settings, "b-x")
    with pytest.raises(RetriesExhaustedError) as info:
        store.get("k")
    assert attempts.calls == RETRIES.max_attempts
    assert isinstance(info.value, TransientStorageError)
    assert not isinstance(info.value, PermanentStorageError)


@pytest.fixture
def no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clear_aws_credentials(monkeypatch, tmp_path)


def test_missing_credentials_are_permanent(
    s3_server: EmbeddedS3, bucket: str, no_aws_credentials: None
) -> None:
    settings = ClientSettings(endpoint_url=s3_server.client_settings().endpoint_url)
    store, attempts = _store(settings, bucket)
    with pytest.raises(CredentialsError, match="no credentials") as info:
        store.get("k")
    assert attempts.calls == 1
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("AccessDenied", AccessDeniedError),
        ("InvalidAccessKeyId", CredentialsError),
        ("SignatureDoesNotMatch", CredentialsError),
    ],
)
def test_denied_requests_are_permanent(
    store: S3ObjectStore, code: str, error: type[PermanentStorageError]
) -> None:
    injector = inject_http_errors(store.client, "GetObject", 10, status=403, code=code)
    with pytest.raises(error, match=code) as info:
        store.get("epochgc/anything")
    assert injector.injected == 1, "a permanent error is not retried"
    assert store.bucket in str(info.value)


def test_slowdown_is_retried_then_succeeds(store: S3ObjectStore) -> None:
    store.put("k", b"v")
    injector = inject_http_errors(store.client, "GetObject", 2, status=503, code="SlowDown")
    assert store.get("k").body == b"v"
    assert injector.injected == 2


def test_slowdown_that_outlasts_the_policy_is_transient(store: S3ObjectStore) -> None:
    inject_http_errors(store.client, "GetObject", 100, status=503, code="SlowDown")
    with pytest.raises(RetriesExhaustedError) as info:
        store.get("k")
    assert isinstance(info.value, TransientStorageError)
