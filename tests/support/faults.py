"""Test-only fault injection around real S3 calls.

Two tools, both leaving every other request to the real embedded server:

* ``inject_http_errors`` answers the next N requests of one operation with an
  HTTP error built by botocore's own ``before-send`` hook (what the Stubber
  uses), so error parsing, translation and retries run exactly as they would
  against S3.
* ``PerKeyErrorClient`` wraps a boto3 client and makes DeleteObjects report
  per-key errors for chosen keys without deleting them, as S3 does under
  load (HTTP 200 with an ``Errors`` list).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from botocore.awsrequest import AWSResponse

from epochgc.errors import PreconditionFailedError, RetriesExhaustedError, TransientStorageError
from tests.support.wrapping import StoreWrapper


class _RawBody:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_kwargs: Any) -> Any:
        yield self._data

    def read(self, *_args: Any) -> bytes:
        data, self._data = self._data, b""
        return data


def error_response(url: str, status: int, code: str) -> AWSResponse:
    body = (
        f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
        f"<Message>injected {code}</Message><RequestId>injected</RequestId></Error>"
    ).encode()
    return AWSResponse(url, status, {"Content-Type": "application/xml"}, _RawBody(body))


class HttpErrorInjector:
    """Answers the next ``count`` requests of ``operation`` with an error."""

    def __init__(self, client: Any, operation: str, count: int, status: int, code: str) -> None:
        self.remaining = count
        self.injected = 0
        self._status = status
        self._code = code
        self._lock = threading.Lock()
        self._event = f"before-send.s3.{operation}"
        self._client = client
        client.meta.events.register(self._event, self._handler)

    def _handler(self, request: Any, **_kwargs: Any) -> AWSResponse | None:
        with self._lock:
            if self.remaining <= 0:
                return None
            self.remaining -= 1
            self.injected += 1
        return error_response(request.url, self._status, self._code)

    def remove(self) -> None:
        self._client.meta.events.unregister(self._event, self._handler)


def inject_http_errors(
    client: Any, operation: str, count: int, status: int = 503, code: str = "SlowDown"
) -> HttpErrorInjector:
    return HttpErrorInjector(client, operation, count, status, code)


class PerKeyErrorClient:
    """Delegates to a real client; its DeleteObjects fails chosen keys.

    ``fail`` decides, per (call number, key), the error code to report for
    that key (or ``None`` to let it through to S3).
    """

    def __init__(self, client: Any, fail: Callable[[int, str], str | None]) -> None:
        self._client = client
        self._fail = fail
        self.calls = 0
        self.meta = client.meta

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        self.calls += 1
        through: list[dict[str, str]] = []
        errors: list[dict[str, str]] = []
        for item in Delete["Objects"]:
            code = self._fail(self.calls, item["Key"])
            if code is None:
                through.append(item)
            else:
                errors.append({"Key": item["Key"], "Code": code, "Message": "injected"})
        response: dict[str, Any] = {"Errors": errors}
        if through:
            real = self._client.delete_objects(
                Bucket=Bucket, Delete={"Objects": through, "Quiet": Delete.get("Quiet", False)}
            )
            response["Errors"] = errors + list(real.get("Errors", []))
        return response


class HookedStore(StoreWrapper):
    """An ``ObjectStore`` wrapper that runs test hooks around create-only puts.

    ``before_create(key, body)`` runs before the real put (it may write a
    competing object, or raise to fail the request unsent);
    ``after_create(key, body)`` runs after it succeeded (raise there to model
    a request that was applied but whose answer was lost).
    """

    def __init__(
        self,
        store: Any,
        *,
        before_create: Callable[[str, bytes], None] | None = None,
        after_create: Callable[[str, bytes], None] | None = None,
    ) -> None:
        super().__init__(store)
        self.before_create = before_create
        self.after_create = after_create

    def put_if_absent(self, key: str, body: bytes, *, metadata: Any = None) -> str:
        if self.before_create is not None:
            self.before_create(key, body)
        etag = str(self._store.put_if_absent(key, body, metadata=metadata))
        if self.after_create is not None:
            self.after_create(key, body)
        return etag


class RejectIfMatchStore(StoreWrapper):
    """An ``ObjectStore`` wrapper that answers 412 to every ``If-Match`` PUT
    without sending it, whatever the ETag's form (Ceph RGW 16 does so only
    to the quoted form). Everything else goes to the real store. ``rejected`` counts
    the refusals."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.rejected = 0

    def put_if_match(self, key: str, body: bytes, etag: str, *, metadata: Any = None) -> str:
        self.rejected += 1
        raise PreconditionFailedError(f"injected 412 (If-Match {etag}) key={key!r}")


class TimesOutAfterApplyingStore(StoreWrapper):
    """Once ``armed``, applies the next ``operation`` call (a method of the
    store, ``put_if_match`` by default) on a key containing ``key_part``,
    then fails it as if every retry had timed out: the caller cannot know
    the write landed. Everything else goes to the real store."""

    def __init__(self, store: Any, operation: str = "put_if_match", key_part: str = "") -> None:
        super().__init__(store)
        self._operation = operation
        self._key_part = key_part
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name != self._operation:
            return attr

        def call(key: str, *args: Any, **kwargs: Any) -> Any:
            result = attr(key, *args, **kwargs)
            if self.armed and self._key_part in key:
                self.armed = False
                raise TransientStorageError(f"timed out after {name} {key} was applied")
            return result

        return call


class OutageStore(StoreWrapper):
    """While ``down``, every call on a key (or prefix) starting with
    ``prefix`` fails as if its retries had run out, before it is sent.
    Everything else goes to the real store."""

    def __init__(self, store: Any, prefix: str) -> None:
        super().__init__(store)
        self._prefix = prefix
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            key = str(args[0]) if args else ""
            if self.down and key.startswith(self._prefix):
                raise RetriesExhaustedError(f"injected 503: {name} {key}", None)
            return attr(*args, **kwargs)

        return call


class StallingStore(StoreWrapper):
    """Once armed, makes the calls of some store methods on keys (or
    prefixes) starting with ``prefix`` hang or fail with an error no store
    raises (a bug's: ``RuntimeError``, ``KeyError``), so that a loop of the
    process stops completing rounds or dies. Everything else goes to the
    real store.

    ``hang()`` blocks those calls until ``release()`` (call it before the
    test's event loop closes: ``asyncio.run`` waits for its threads);
    ``fail(error)`` raises ``error`` from them; ``hits`` counts the calls
    that met the fault.
    """

    def __init__(self, store: Any, prefix: str, methods: tuple[str, ...]) -> None:
        super().__init__(store)
        self._prefix = prefix
        self._methods = methods
        self._fault: str | BaseException | None = None
        self._released = threading.Event()
        self.hits = 0

    def hang(self) -> None:
        self._fault = "hang"

    def fail(self, error: BaseException) -> None:
        self._fault = error

    def release(self) -> None:
        """Disarm, and let every hung call go on to the real store."""
        self._fault = None
        self._released.set()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in self._methods:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            fault = self._fault
            if fault is not None and args and str(args[0]).startswith(self._prefix):
                self.hits += 1
                if fault == "hang":
                    self._released.wait()
                elif isinstance(fault, BaseException):
                    raise fault
            return attr(*args, **kwargs)

        return call
