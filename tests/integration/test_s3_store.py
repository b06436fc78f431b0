"""S3ObjectStore against the embedded S3 over HTTP."""

from __future__ import annotations

import socket

import pytest

from epochgc.errors import (
    DeleteFailedError,
    NotFoundError,
    PreconditionFailedError,
    RetriesExhaustedError,
    StorageError,
    StoreUnreachableError,
)
from epochgc.storage.client import ClientSettings, make_s3_client
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.retry import RetryPolicy
from epochgc.storage.s3 import S3ObjectStore
from tests.support.faults import PerKeyErrorClient, inject_http_errors
from tests.support.moto_seed import seed_objects


def _keys_under(store: S3ObjectStore, prefix: str) -> list[str]:
    return [o.key for o in store.list_objects(prefix)]


def test_put_get_head_and_ranges(store: S3ObjectStore) -> None:
    etag = store.put("a/b", b"0123456789", metadata={"k": "v"})
    got = store.get("a/b")
    assert got.body == b"0123456789"
    assert got.etag == etag
    assert got.metadata == {"k": "v"}
    assert store.get("a/b", byte_range=(2, 4)).body == b"234"
    head = store.head("a/b")
    assert (head.size, head.etag) == (10, etag)
    with pytest.raises(NotFoundError):
        store.get("a/missing")
    with pytest.raises(NotFoundError):
        store.head("a/missing")


def test_create_only_put_refuses_an_existing_key(store: S3ObjectStore) -> None:
    store.put_if_absent("k", b"first")
    with pytest.raises(PreconditionFailedError):
        store.put_if_absent("k", b"second")
    assert store.get("k").body == b"first"


def test_compare_and_swap(store: S3ObjectStore) -> None:
    v1 = store.put_if_absent("k", b"v1")
    v2 = store.put_if_match("k", b"v2", v1)
    assert store.get("k").body == b"v2"
    with pytest.raises(PreconditionFailedError):
        store.put_if_match("k", b"v3", v1)
    assert store.get("k").body == b"v2"
    store.put_if_match("k", b"v3", v2)
    assert store.get("k").body == b"v3"
    with pytest.raises(NotFoundError):
        store.put_if_match("missing", b"x", v1)


def test_listing_paginates_over_more_than_1000_keys(store: S3ObjectStore, bucket: str) -> None:
    keys = [f"p/{i:05d}" for i in range(2500)]
    seed_objects(bucket, reversed(keys))
    seed_objects(bucket, ["q/outside"])
    stats = RequestStats()
    stats.attach(store.client)
    pages = list(store.list_pages("p/"))
    assert [len(p) for p in pages] == [1000, 1000, 500]
    assert [o.key for p in pages for o in p] == keys
    assert stats.by_operation() == {"ListObjectsV2": 3}
    assert _keys_under(store, "p/")[:2] == keys[:2]
    assert [o.key for o in store.list_objects("p/", start_after="p/02497")] == keys[2498:]


def test_delete_many_uses_one_request_per_1000_keys(store: S3ObjectStore, bucket: str) -> None:
    keys = [f"d/{i:05d}" for i in range(2500)]
    seed_objects(bucket, [*keys, "keep/me"])
    stats = RequestStats()
    stats.attach(store.client)
    outcome = store.delete_many(keys)
    assert sorted(outcome.deleted) == keys
    assert not outcome.failed
    assert outcome.requests == 3
    assert stats.by_operation() == {"DeleteObjects": 3}
    assert _keys_under(store, "d/") == []
    assert _keys_under(store, "keep/") == ["keep/me"]


def test_per_key_errors_are_retried_until_done(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    keys = [f"d/{i:04d}" for i in range(1500)]
    seed_objects(bucket, keys)
    flaky = set(keys[::7])

    def fail(call: int, key: str) -> str | None:
        # The first two requests that carry a flaky key fail it.
        return ("InternalError" if call % 2 else "SlowDown") if key in flaky and call <= 3 else None

    client = PerKeyErrorClient(s3_client, fail)
    sleeps: list[float] = []
    store = S3ObjectStore(
        client,  # type: ignore[arg-type]
        bucket,
        retry_policy=RetryPolicy(max_attempts=5, base_delay_seconds=0.01, max_delay_seconds=0.1),
        sleep=sleeps.append,
        unit_random=lambda: 0.5,
        delete_concurrency=1,
    )
    outcome = store.delete_many(keys)
    assert not outcome.failed
    assert sorted(outcome.deleted) == keys
    assert outcome.requests > 2
    assert sleeps, "retries of per-key errors must back off"
    assert _keys_under(store, "d/") == []


def test_non_retryable_per_key_errors_fail_without_retry(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    keys = [f"d/{i}" for i in range(10)]
    seed_objects(bucket, keys)
    client = PerKeyErrorClient(s3_client, lambda _c, k: "AccessDenied" if k == "d/3" else None)
    store = S3ObjectStore(client, bucket, delete_concurrency=1)  # type: ignore[arg-type]
    outcome = store.delete_batch(keys)
    assert outcome.failed == {"d/3": "AccessDenied"}
    assert outcome.requests == 1
    assert _keys_under(store, "d/") == ["d/3"]
    with pytest.raises(DeleteFailedError, match="AccessDenied"):
        outcome.raise_for_failures()


def test_per_key_errors_that_never_clear_are_reported(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    seed_objects(bucket, ["d/a", "d/b"])
    client = PerKeyErrorClient(s3_client, lambda _c, k: "SlowDown" if k == "d/a" else None)
    store = S3ObjectStore(
        client,  # type: ignore[arg-type]
        bucket,
        retry_policy=RetryPolicy(max_attempts=3, base_delay_seconds=0.0, max_delay_seconds=0.0),
        sleep=lambda _s: None,
    )
    outcome = store.delete_batch(["d/a", "d/b"])
    assert outcome.failed == {"d/a": "SlowDown"}
    assert outcome.deleted == ("d/b",)
    assert outcome.requests == 3


def test_deleting_missing_keys_is_not_an_error(store: S3ObjectStore) -> None:
    outcome = store.delete_many(["never/1", "never/2"])
    assert sorted(outcome.deleted) == ["never/1", "never/2"]
    assert not outcome.failed


def test_slowdown_backs_off_with_growing_jittered_waits(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    stats = RequestStats()
    stats.attach(s3_client)
    sleeps: list[float] = []
    store = S3ObjectStore(
        s3_client,
        bucket,
        retry_policy=RetryPolicy(max_attempts=6, base_delay_seconds=0.1, max_delay_seconds=10.0),
        sleep=sleeps.append,
        unit_random=lambda: 0.999,
    )
    injector = inject_http_errors(s3_client, "PutObject", count=3, status=503, code="SlowDown")
    store.put("k", b"v")
    injector.remove()
    assert store.get("k").body == b"v"
    assert injector.injected == 3
    assert sleeps == pytest.approx([0.0999, 0.1998, 0.3996])
    assert stats.by_outcome()[("PutObject", "503")] == 3
    assert stats.by_outcome()[("PutObject", "200")] == 1


def test_slowdown_that_never_ends_raises_retries_exhausted(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    sleeps: list[float] = []
    store = S3ObjectStore(
        s3_client, bucket, retry_policy=RetryPolicy(max_attempts=4), sleep=sleeps.append
    )
    injector = inject_http_errors(s3_client, "GetObject", count=100, status=503, code="SlowDown")
    try:
        with pytest.raises(RetriesExhaustedError) as info:
            store.get("anything")
    finally:
        injector.remove()
    assert injector.injected == 4
    assert len(sleeps) == 3
    assert "SlowDown" in str(info.value)
    assert info.value.last_error is not None


def test_server_errors_other_than_throttling_are_retried_too(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    store = S3ObjectStore(s3_client, bucket, sleep=lambda _s: None)
    injector = inject_http_errors(
        s3_client, "ListObjectsV2", count=2, status=500, code="InternalError"
    )
    try:
        assert list(store.list_objects("nothing/")) == []
    finally:
        injector.remove()
    assert injector.injected == 2


def test_client_errors_are_not_retried(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    sleeps: list[float] = []
    store = S3ObjectStore(s3_client, bucket, sleep=sleeps.append)
    injector = inject_http_errors(s3_client, "PutObject", count=1, status=403, code="AccessDenied")
    try:
        with pytest.raises(StorageError, match="AccessDenied"):
            store.put("k", b"v")
    finally:
        injector.remove()
    assert sleeps == []


def test_a_dead_endpoint_exhausts_retries_with_a_typed_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = make_s3_client(
        ClientSettings(
            endpoint_url=f"http://127.0.0.1:{port}",
            access_key_id="x",
            secret_access_key="y",
            connect_timeout_seconds=0.5,
        )
    )
    sleeps: list[float] = []
    store = S3ObjectStore(
        client, "bucket", retry_policy=RetryPolicy(max_attempts=3), sleep=sleeps.append
    )
    with pytest.raises(
        StoreUnreachableError, match=r"connection refused \(3 attempts, PutObject\)"
    ):
        store.put("k", b"v")  # still a RetriesExhaustedError: transient for a long-running process
    assert len(sleeps) == 2
