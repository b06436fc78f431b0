"""The boto3 implementation of ``ObjectStore``.

One method, one S3 operation. Every call goes through ``_call``, the single
retry layer: transient failures (5xx, SlowDown, throttling, dropped
connections, timeouts) are retried with full-jitter backoff up to the policy's
bound, then surface as ``RetriesExhaustedError`` (a ``TransientStorageError``);
everything else becomes a typed error at once. ``translate_error`` is the one
place store errors are classified: permanent causes (no such bucket, access
denied, missing or refused credentials, an endpoint host that does not
resolve) become a ``PermanentStorageError`` whose one-line message names the
cause and what to check, and are never retried. DeleteObjects adds a second,
narrower loop that lives only here: S3 reports per-key failures inside an
HTTP 200, which no transport layer ever retries, so ``delete_batch``
resubmits exactly the keys whose per-key error code is retryable.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
)
from urllib3.exceptions import NameResolutionError

from epochgc.errors import (
    LEAST_PRIVILEGE_SECTION,
    AccessDeniedError,
    BucketMissingError,
    ConflictError,
    CredentialsError,
    EndpointError,
    NotFoundError,
    PreconditionFailedError,
    RetriesExhaustedError,
    StorageError,
    StoreUnreachableError,
    TransientStorageError,
)
from epochgc.events import EventChannel
from epochgc.storage.object_store import (
    MAX_KEYS_PER_DELETE,
    DeleteOutcome,
    ObjectInfo,
    PagedStore,
    StoredObject,
    Throttled,
    key_batches,
)
from epochgc.storage.retry import (
    ACCESS_DENIED_CODES,
    BUCKET_MISSING_CODES,
    CREDENTIALS_ERROR_CODES,
    THROTTLING_ERROR_CODES,
    RetryPolicy,
    is_retryable,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ListObjectsV2OutputTypeDef

log = logging.getLogger(__name__)

T = TypeVar("T")

_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})

IfMatchForm = Literal["quoted", "bare"]
"""How a store wants the ETag in ``If-Match``: ``quoted`` as S3 returns it
(``"abc"``), or ``bare`` (``abc``): Ceph RGW 16 and DigitalOcean Spaces
answer 412 to the quoted form of the very ETag they returned."""

IF_MATCH_FORMS: tuple[IfMatchForm, ...] = get_args(IfMatchForm)


def if_match_value(etag: str, form: IfMatchForm) -> str:
    """``etag`` (in either form) as the ``If-Match`` header value ``form`` wants."""
    bare = etag.strip('"')
    return bare if form == "bare" else f'"{bare}"'


class S3ObjectStore(PagedStore):
    """``ObjectStore`` over a boto3 S3 client.

    Example::

        store = S3ObjectStore(make_s3_client(ClientSettings()), "my-bucket")
        etag = store.put_if_absent("epochgc/meta/leases/gc", b"{}")

    Args:
        client: a boto3 S3 client, ideally from ``make_s3_client`` (botocore
            retries off, so this class is the only retry layer).
        bucket: the bucket every key lives in.
        retry_policy: bounds and backoff for transient failures.
        sleep: injected so tests can run backoff without waiting.
        unit_random: injected jitter source, uniform in [0, 1).
        delete_concurrency: DeleteObjects requests ``delete_many`` keeps in
            flight at once.
        events: where every SlowDown/throttling answer (whole request or
            per key) is published as ``Throttled``, so a sweeper given the
            same channel lowers its request rate (default: no listener).
        if_match_form: the ETag form ``put_if_match`` sends; callers always
            pass ETags as the store returned them. The capability probes
            find it (``use_if_match_form``) or ``store.if_match_form`` sets it.
    """

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        *,
        retry_policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        unit_random: Callable[[], float] = random.random,
        delete_concurrency: int = 4,
        events: EventChannel | None = None,
        if_match_form: IfMatchForm = "quoted",
    ) -> None:
        if delete_concurrency < 1:
            raise ValueError("delete_concurrency must be >= 1")
        self._client = client
        self._bucket = bucket
        self._policy = retry_policy or RetryPolicy()
        self._sleep = sleep
        self._unit_random = unit_random
        self._delete_concurrency = delete_concurrency
        self._events = events if events is not None else EventChannel()
        self._endpoint = str(getattr(client.meta, "endpoint_url", "") or "")
        self._if_match_form: IfMatchForm = "quoted"
        self.use_if_match_form(if_match_form)

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def if_match_form(self) -> IfMatchForm:
        """The ETag form ``put_if_match`` sends."""
        return self._if_match_form

    def use_if_match_form(self, form: IfMatchForm) -> None:
        """Send ETags in ``form`` from now on (what the probes found)."""
        if form not in IF_MATCH_FORMS:
            raise ValueError(f"if_match_form must be one of {IF_MATCH_FORMS}, got {form!r}")
        self._if_match_form = form

    @property
    def client(self) -> S3Client:
        """The underlying client (for request accounting hooks)."""
        return self._client

    # --- reads ------------------------------------------------------------

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None) -> StoredObject:
        def call() -> StoredObject:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": key}
            if byte_range is not None:
                first, last = byte_range
                if first < 0 or last < first:
                    raise ValueError(f"invalid byte range {byte_range}")
                kwargs["Range"] = f"bytes={first}-{last}"
            response = self._client.get_object(**kwargs)
            body = response["Body"].read()
            return StoredObject(
                key=key,
                body=body,
                etag=response["ETag"],
                last_modified=response["LastModified"],
                metadata=dict(response.get("Metadata", {})),
            )

        return self._call("GetObject", key, call)

    def head(self, key: str) -> ObjectInfo:
        def call() -> ObjectInfo:
            response = self._client.head_object(Bucket=self._bucket, Key=key)
            return ObjectInfo(
                key=key,
                size=response["ContentLength"],
                etag=response["ETag"],
                last_modified=response["LastModified"],
            )

        return self._call("HeadObject", key, call)

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[list[ObjectInfo]]:
        if not 1 <= page_size <= 1000:
            raise ValueError(f"page_size must be in 1..1000, got {page_size}")
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "Bucket": self._bucket,
                "Prefix": prefix,
                "MaxKeys": page_size,
            }
            if token is not None:
                kwargs["ContinuationToken"] = token
            elif start_after is not None:
                kwargs["StartAfter"] = start_after
            response = self._list_page(prefix, kwargs)
            page = [
                ObjectInfo(
                    key=item["Key"],
                    size=item["Size"],
                    etag=item.get("ETag", ""),
                    last_modified=item["LastModified"],
                )
                for item in response.get("Contents", [])
            ]
            if page:
                yield page
            if not response.get("IsTruncated"):
                return
            token = response.get("NextContinuationToken")
            if not token:
                return

    def list_prefixes(self, prefix: str) -> list[str]:
        found: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix, "Delimiter": "/"}
            if token is not None:
                kwargs["ContinuationToken"] = token
            response = self._list_page(prefix, kwargs)
            found += [p["Prefix"] for p in response.get("CommonPrefixes", []) if "Prefix" in p]
            token = response.get("NextContinuationToken")
            if not response.get("IsTruncated") or not token:
                return sorted(found)

    def _list_page(self, prefix: str, kwargs: dict[str, Any]) -> ListObjectsV2OutputTypeDef:
        return self._call("ListObjectsV2", prefix, lambda: self._client.list_objects_v2(**kwargs))

    # --- writes -----------------------------------------------------------

    def put(self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None) -> str:
        return self._put(key, body, metadata, {})

    def put_if_absent(
        self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        return self._put(key, body, metadata, {"IfNoneMatch": "*"})

    def put_if_match(
        self, key: str, body: bytes, etag: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        if not etag:
            raise ValueError("put_if_match needs a non-empty etag")
        return self._put(
            key, body, metadata, {"IfMatch": if_match_value(etag, self._if_match_form)}
        )

    def _put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str] | None,
        conditions: dict[str, str],
    ) -> str:
        def call() -> str:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": key, "Body": body}
            if metadata:
                kwargs["Metadata"] = dict(metadata)
            kwargs.update(conditions)
            response = self._client.put_object(**kwargs)
            return response["ETag"]

        return self._call("PutObject", key, call)

    def delete(self, key: str) -> None:
        self._call(
            "DeleteObject", key, lambda: self._client.delete_object(Bucket=self._bucket, Key=key)
        )

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        if len(keys) > MAX_KEYS_PER_DELETE:
            raise ValueError(f"at most {MAX_KEYS_PER_DELETE} keys per batch, got {len(keys)}")
        pending = list(dict.fromkeys(keys))
        deleted: list[str] = []
        failed: dict[str, str] = {}
        requests = 0
        attempt = 0
        while pending:
            attempt += 1
            requests += 1
            errors = self._delete_objects_once(pending)
            retry: list[str] = []
            retry_codes: dict[str, str] = {}
            for key in pending:
                code = errors.get(key)
                if code is None or code == "NoSuchKey":
                    deleted.append(key)
                elif is_retryable(code, None):
                    retry.append(key)
                    retry_codes[key] = code
                else:
                    failed[key] = code
            if not retry:
                break
            if any(code in THROTTLING_ERROR_CODES for code in retry_codes.values()):
                self._events.publish(Throttled("DeleteObjects"))
            if not self._policy.can_retry(attempt):
                failed.update(retry_codes)
                log.warning(
                    "delete gave up on %d keys after %d attempts (first code=%s)",
                    len(retry),
                    attempt,
                    retry_codes[retry[0]],
                )
                break
            self._back_off("DeleteObjects", attempt, f"{len(retry)} per-key errors")
            pending = retry
        return DeleteOutcome(tuple(deleted), failed, requests)

    def _delete_objects_once(self, keys: list[str]) -> dict[str, str]:
        """One DeleteObjects request (transport retries included); returns the
        per-key error code of every key S3 did not delete."""
        try:
            response = self._call(
                "DeleteObjects",
                keys[0],
                lambda: self._client.delete_objects(
                    Bucket=self._bucket,
                    Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True},
                ),
            )
        except RetriesExhaustedError as err:
            # The whole request kept failing: every key failed with that cause.
            code = _error_code(err.last_error) or "RetriesExhausted"
            return dict.fromkeys(keys, code)
        return {
            str(item.get("Key", "")): str(item.get("Code", "Unknown"))
            for item in response.get("Errors", [])
        }

    def delete_many(self, keys: Iterable[str]) -> DeleteOutcome:
        batches = key_batches(keys)
        if self._delete_concurrency == 1:
            return DeleteOutcome.merge(self.delete_batch(b) for b in batches)
        with ThreadPoolExecutor(
            max_workers=self._delete_concurrency, thread_name_prefix="epochgc-delete"
        ) as pool:
            return DeleteOutcome.merge(pool.map(self.delete_batch, batches))

    def bucket_request(self, operation: str, fn: Callable[[], T]) -> T:
        """One request about the bucket itself (its settings) through the
        same retries and error classification as every object request."""
        return self._call(operation, "", fn)

    # --- the retry layer --------------------------------------------------

    def _call(self, operation: str, key: str, fn: Callable[[], T]) -> T:
        """Run one S3 operation with bounded retries of transient failures.

        Raises:
            PreconditionFailedError, ConflictError, NotFoundError: at once.
            PermanentStorageError: at once (missing bucket, access denied,
                credentials, unknown endpoint host).
            RetriesExhaustedError: transient failures outlasted the policy.
            StorageError: any other S3 error.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn()
            except (ClientError, BotoCoreError) as raw:
                err = translate_error(
                    raw, operation, key, bucket=self._bucket, endpoint=self._endpoint
                )
                if not isinstance(err, TransientStorageError):
                    raise err from raw
                if _error_code(raw) in THROTTLING_ERROR_CODES:
                    self._events.publish(Throttled(operation))
                if not self._policy.can_retry(attempt):
                    if isinstance(raw, EndpointConnectionError):
                        raise StoreUnreachableError(
                            f"cannot reach the store at {self._endpoint or 'aws'}: "
                            f"{_connection_failure(raw)} ({attempt} attempts, {operation}): "
                            "check store.endpoint_url and that the store is running",
                            raw,
                        ) from raw
                    raise RetriesExhaustedError(
                        f"{operation} failed after {attempt} attempts key={key!r}: {err}", raw
                    ) from raw
                self._back_off(operation, attempt, str(err))

    def _back_off(self, operation: str, attempt: int, reason: str) -> None:
        delay = self._policy.backoff_seconds(attempt, self._unit_random())
        log.debug("%s attempt %d failed (%s); retrying in %.3fs", operation, attempt, reason, delay)
        self._sleep(delay)


def translate_error(
    raw: BaseException, operation: str, key: str, *, bucket: str = "", endpoint: str = ""
) -> StorageError:
    """Map a botocore error onto epochgc's error tree: the one place a store
    error is classified as permanent, transient or a protocol answer (412,
    409, 404).

    A permanent error's message is one line naming the cause, the bucket and
    endpoint, and what to check; it never carries credentials.
    """
    at = f"bucket={bucket!r} endpoint={endpoint or 'aws'}"
    if isinstance(raw, ClientError):
        code = _error_code(raw)
        status = raw.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        where = f"{operation} key={key!r} code={code} status={status}"
        if status == 412 or code == "PreconditionFailed":
            return PreconditionFailedError(f"precondition failed: {where}")
        if status == 409 or code == "ConditionalRequestConflict":
            return ConflictError(f"conflicting conditional request: {where}")
        if code in BUCKET_MISSING_CODES:
            return BucketMissingError(
                f"bucket {bucket!r} does not exist at endpoint {endpoint or 'aws'} "
                f"(code={code}): check store.bucket and store.endpoint_url"
            )
        if code in CREDENTIALS_ERROR_CODES:
            return CredentialsError(
                f"the store refused the credentials (code={code}) for {at}: check the "
                "credential source (store.access_key_id/secret_access_key, the AWS_* "
                "environment, the profile or instance role)"
            )
        if code in ACCESS_DENIED_CODES or (code is None and status == 403):
            return AccessDeniedError(
                f"access denied (code={code}) to {at} for {operation} key={key!r}: check "
                f"the IAM and bucket policy of these credentials against {LEAST_PRIVILEGE_SECTION}"
            )
        if code in _NOT_FOUND_CODES or status == 404:
            return NotFoundError(f"not found: {where}")
        if is_retryable(code, status):
            return TransientStorageError(f"transient: {where}")
        return StorageError(f"S3 error: {where}")
    if isinstance(raw, NoCredentialsError | PartialCredentialsError):
        return CredentialsError(
            f"no credentials found for {at} ({type(raw).__name__}): set "
            "store.access_key_id/secret_access_key, the AWS_* environment, a profile "
            "or an instance role"
        )
    if isinstance(raw, EndpointConnectionError) and isinstance(
        raw.kwargs.get("error"), NameResolutionError
    ):
        return EndpointError(
            f"the endpoint host does not resolve: {at}: check store.endpoint_url (and DNS)"
        )
    # Other BotoCoreErrors: connection refused/reset, timeouts, incomplete reads.
    return TransientStorageError(f"{operation} key={key!r}: {type(raw).__name__}: {raw}")


def _connection_failure(raw: EndpointConnectionError) -> str:
    """What the socket said, in a few words."""
    cause: BaseException | None = raw.kwargs.get("error")
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, TimeoutError):
            return "connection timed out"
        cause = cause.__cause__ or cause.__context__
    return f"cannot connect ({raw.kwargs.get('error') or raw})"


def _error_code(raw: BaseException | None) -> str | None:
    if isinstance(raw, ClientError):
        code = raw.response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None
