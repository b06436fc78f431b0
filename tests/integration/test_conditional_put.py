"""``put_conditionally``: a write whose answer was lost still counts, a lost
race never does, and the judge is the stored bytes."""

from __future__ import annotations

from typing import Any

from epochgc.errors import PreconditionFailedError
from epochgc.storage.conditional_put import put_conditionally
from epochgc.storage.s3 import S3ObjectStore
from tests.support.wrapping import StoreWrapper


class AnswerLost(StoreWrapper):
    """Applies the write, then answers 412, as a retried PUT after a
    timeout does."""

    def put_if_match(self, key: str, body: bytes, etag: str, **kw: Any) -> str:
        self._store.put_if_match(key, body, etag, **kw)
        raise PreconditionFailedError(f"answer lost: {key}")

    def put_if_absent(self, key: str, body: bytes, **kw: Any) -> str:
        self._store.put_if_absent(key, body, **kw)
        raise PreconditionFailedError(f"answer lost: {key}")


def test_create_and_replace(store: S3ObjectStore) -> None:
    first = put_conditionally(store, "k", b"one", None)
    assert first is not None
    second = put_conditionally(store, "k", b"two", first)
    assert second is not None and store.get("k").body == b"two"


def test_a_lost_race_is_none_and_changes_nothing(store: S3ObjectStore) -> None:
    first = put_conditionally(store, "k", b"one", None)
    assert first is not None
    assert put_conditionally(store, "k", b"mine", None) is None
    store.put("k", b"theirs")
    assert put_conditionally(store, "k", b"mine", first) is None
    assert store.get("k").body == b"theirs"
    assert put_conditionally(store, "missing", b"mine", first) is None


def test_a_write_that_landed_counts_though_its_answer_was_lost(store: S3ObjectStore) -> None:
    lossy = AnswerLost(store)
    created = put_conditionally(lossy, "k", b"one", None)  # type: ignore[arg-type]
    assert created == store.get("k").etag
    replaced = put_conditionally(lossy, "k", b"two", created)  # type: ignore[arg-type]
    assert replaced == store.get("k").etag and store.get("k").body == b"two"
