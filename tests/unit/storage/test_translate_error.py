"""``translate_error`` is the one place a store error is classified; every
named code lands in exactly one class, and no permanent code is retryable."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import (
    AccessDeniedError,
    BucketMissingError,
    CredentialsError,
    NotFoundError,
    PermanentStorageError,
    PreconditionFailedError,
    StorageError,
    TransientStorageError,
)
from epochgc.storage.retry import (
    ACCESS_DENIED_CODES,
    BUCKET_MISSING_CODES,
    CREDENTIALS_ERROR_CODES,
    RETRYABLE_ERROR_CODES,
)
from epochgc.storage.s3 import translate_error

PERMANENT = BUCKET_MISSING_CODES | ACCESS_DENIED_CODES | CREDENTIALS_ERROR_CODES


def client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": "m"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "GetObject",
    )


def test_permanent_and_retryable_codes_are_disjoint() -> None:
    assert not PERMANENT & RETRYABLE_ERROR_CODES
    assert not BUCKET_MISSING_CODES & ACCESS_DENIED_CODES
    assert not ACCESS_DENIED_CODES & CREDENTIALS_ERROR_CODES


@pytest.mark.parametrize(
    ("codes", "status", "expected"),
    [
        (BUCKET_MISSING_CODES, 404, BucketMissingError),
        (ACCESS_DENIED_CODES, 403, AccessDeniedError),
        (CREDENTIALS_ERROR_CODES, 403, CredentialsError),
        (RETRYABLE_ERROR_CODES, 503, TransientStorageError),
    ],
)
def test_each_named_code_lands_in_its_class(
    codes: frozenset[str], status: int, expected: type[StorageError]
) -> None:
    for code in codes:
        err = translate_error(client_error(code, status), "GetObject", "k", bucket="b")
        assert type(err) is expected, code
        assert "\n" not in str(err)


def test_a_missing_key_is_not_a_missing_bucket() -> None:
    err = translate_error(client_error("NoSuchKey", 404), "GetObject", "k")
    assert type(err) is NotFoundError
    assert type(translate_error(client_error("NoSuchBucket", 404), "GetObject", "k")) is (
        BucketMissingError
    )


def test_412_wins_over_everything() -> None:
    err = translate_error(client_error("PreconditionFailed", 412), "PutObject", "k")
    assert isinstance(err, PreconditionFailedError)


@pytest.mark.parametrize(
    "raw", [NoCredentialsError(), PartialCredentialsError(provider="env", cred_var="x")]
)
def test_missing_credentials_are_permanent(raw: Exception) -> None:
    err = translate_error(raw, "GetObject", "k", bucket="b", endpoint="http://e")
    assert isinstance(err, CredentialsError)
    assert "'b'" in str(err) and "http://e" in str(err)


@given(code=st.text(min_size=1, max_size=30), status=st.sampled_from([400, 403, 404, 500, 503]))
def test_every_error_is_classified_once(code: str, status: int) -> None:
    err = translate_error(client_error(code, status), "GetObject", "k")
    assert not (isinstance(err, PermanentStorageError) and isinstance(err, TransientStorageError))
    if code in PERMANENT:
        assert isinstance(err, PermanentStorageError)
    if isinstance(err, PermanentStorageError):
        assert code in PERMANENT or status == 403
