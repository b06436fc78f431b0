"""One ``ObjectStore`` contract, run on every store the tests and benchmarks
stand on: the in-memory double (``epochgc/simulate/memory_store.py``), the S3
store over the embedded server, and the fault-injecting wrappers with no
fault armed (``epochgc.verify.faults.FaultyStore`` over S3, and
``tests/support/faults.py``'s ``OutageStore`` over the double).

What is asserted is what ``epochgc/storage/object_store.py`` promises (and
what S3 does where the double claims S3's semantics): if the double and S3
ever disagree, one of these tests fails on one of them. The armed-fault
cases at the end check that a fault surfaces as the typed error the
contract names, never as a raw exception.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pytest

from epochgc.errors import (
    DeleteFailedError,
    NotFoundError,
    PreconditionFailedError,
    RetriesExhaustedError,
)
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.s3 import S3ObjectStore
from epochgc.verify.faults import FaultPlan, FaultyStore
from tests.support.faults import OutageStore, inject_http_errors
from tests.support.moto_seed import seed_objects

NO_FAULTS = FaultPlan(error=0, slowdown=0, unknown_outcome=0, latency=0, partial_delete=0)


@dataclass(frozen=True)
class Subject:
    """A store under contract, and a fast way to fill it for set-up (many
    keys over HTTP would take seconds; what is asserted goes through the
    store)."""

    store: ObjectStore
    seed: Callable[[Iterable[str]], object]


def _memory(_request: pytest.FixtureRequest) -> Subject:
    memory = MemoryStore()
    return Subject(memory, lambda keys: [memory.put(k, b"x") for k in keys])


def _s3(request: pytest.FixtureRequest) -> Subject:
    store: S3ObjectStore = request.getfixturevalue("store")
    return Subject(store, lambda keys: seed_objects(store.bucket, keys))


def _faulty_s3(request: pytest.FixtureRequest) -> Subject:
    s3 = _s3(request)
    return Subject(FaultyStore(s3.store, NO_FAULTS, seed=1), s3.seed)


def _outage_memory(request: pytest.FixtureRequest) -> Subject:
    memory = _memory(request)
    return Subject(OutageStore(memory.store, prefix=""), memory.seed)


STORES = {"memory": _memory, "s3": _s3, "faulty-s3": _faulty_s3, "outage-memory": _outage_memory}


@pytest.fixture(params=sorted(STORES))
def subject(request: pytest.FixtureRequest) -> Subject:
    return STORES[request.param](request)


@pytest.fixture
def any_store(subject: Subject) -> ObjectStore:
    return subject.store


def _md5_etag(body: bytes) -> str:
    return f'"{hashlib.md5(body).hexdigest()}"'  # S3's ETag, not security


def _keys(store: ObjectStore, prefix: str, **kwargs: object) -> list[str]:
    return [o.key for o in store.list_objects(prefix, **kwargs)]  # type: ignore[arg-type]


class TestObjectStoreContract:
    # --- reads and unconditional writes ---------------------------------------

    def test_put_then_get_and_head_agree(self, any_store: ObjectStore) -> None:
        etag = any_store.put("a/b", b"0123456789", metadata={"k": "v"})
        got = any_store.get("a/b")
        head = any_store.head("a/b")
        assert etag == _md5_etag(b"0123456789")
        assert (got.key, got.body, got.etag, got.metadata) == (
            "a/b",
            b"0123456789",
            etag,
            {"k": "v"},
        )
        assert (head.key, head.size, head.etag) == ("a/b", 10, etag)
        assert got.last_modified.tzinfo is not None
        assert head.last_modified == got.last_modified

    def test_a_byte_range_is_inclusive_and_keeps_the_version_facts(
        self, any_store: ObjectStore
    ) -> None:
        etag = any_store.put("r", b"0123456789", metadata={"k": "v"})
        part = any_store.get("r", byte_range=(2, 4))
        assert (part.body, part.etag, part.metadata) == (b"234", etag, {"k": "v"})
        assert any_store.get("r", byte_range=(8, 9)).body == b"89"
        assert any_store.get("r", byte_range=(0, 0)).body == b"0"

    def test_put_replaces_and_the_etag_follows_the_bytes(self, any_store: ObjectStore) -> None:
        first = any_store.put("k", b"one")
        second = any_store.put("k", b"two")
        assert first != second
        assert any_store.get("k").body == b"two"
        assert any_store.put("k", b"two") == second

    def test_missing_keys_are_not_found(self, any_store: ObjectStore) -> None:
        any_store.put("present", b"x")
        with pytest.raises(NotFoundError):
            any_store.get("absent")
        with pytest.raises(NotFoundError):
            any_store.get("absent", byte_range=(0, 1))
        with pytest.raises(NotFoundError):
            any_store.head("absent")

    # --- conditional writes ----------------------------------------------------

    def test_put_if_absent_creates_once(self, any_store: ObjectStore) -> None:
        etag = any_store.put_if_absent("k", b"first", metadata={"k": "v"})
        assert etag == _md5_etag(b"first")
        with pytest.raises(PreconditionFailedError):
            any_store.put_if_absent("k", b"second")
        with pytest.raises(PreconditionFailedError):
            any_store.put_if_absent("k", b"first")
        got = any_store.get("k")
        assert (got.body, got.etag, got.metadata) == (b"first", etag, {"k": "v"})

    def test_put_if_absent_after_a_delete_creates_again(self, any_store: ObjectStore) -> None:
        any_store.put_if_absent("k", b"first")
        any_store.delete("k")
        any_store.put_if_absent("k", b"again")
        assert any_store.get("k").body == b"again"

    def test_put_if_match_swaps_only_the_current_version(self, any_store: ObjectStore) -> None:
        v1 = any_store.put_if_absent("k", b"v1")
        v2 = any_store.put_if_match("k", b"v2", v1, metadata={"k": "v"})
        assert v2 == _md5_etag(b"v2")
        got = any_store.get("k")
        assert (got.body, got.etag, got.metadata) == (b"v2", v2, {"k": "v"})
        with pytest.raises(PreconditionFailedError):
            any_store.put_if_match("k", b"v3", v1)
        assert any_store.get("k").body == b"v2"
        assert any_store.put_if_match("k", b"v3", any_store.head("k").etag) == _md5_etag(b"v3")

    def test_put_if_match_after_an_unconditional_put_is_stale(self, any_store: ObjectStore) -> None:
        v1 = any_store.put("k", b"v1")
        any_store.put("k", b"other")
        with pytest.raises(PreconditionFailedError):
            any_store.put_if_match("k", b"v2", v1)
        assert any_store.get("k").body == b"other"

    def test_put_if_match_on_a_missing_key_is_not_found(self, any_store: ObjectStore) -> None:
        etag = any_store.put("k", b"v1")
        any_store.delete("k")
        with pytest.raises(NotFoundError):
            any_store.put_if_match("k", b"v2", etag)
        with pytest.raises(NotFoundError):
            any_store.head("k")

    # --- listing -----------------------------------------------------------------

    def test_listing_is_lexicographic_and_bounded_by_the_prefix(
        self, any_store: ObjectStore
    ) -> None:
        keys = ["p/b", "p/a/2", "p/a/10", "p/a/1", "p", "p0", "o/x", "q/x"]
        for key in keys:
            any_store.put(key, key.encode())
        assert _keys(any_store, "p/") == ["p/a/1", "p/a/10", "p/a/2", "p/b"]
        assert _keys(any_store, "p") == ["p", "p/a/1", "p/a/10", "p/a/2", "p/b", "p0"]
        assert _keys(any_store, "") == sorted(keys)
        assert _keys(any_store, "none/") == []
        assert list(any_store.list_pages("none/")) == []

    def test_listed_infos_match_head(self, any_store: ObjectStore) -> None:
        any_store.put("i/one", b"1")
        any_store.put("i/two", b"22")
        for info in any_store.list_objects("i/"):
            head = any_store.head(info.key)
            assert (info.size, info.etag) == (head.size, head.etag)
            assert info.last_modified.tzinfo is not None

    def test_start_after_is_exclusive_and_may_lie_outside(self, any_store: ObjectStore) -> None:
        for key in ["s/1", "s/2", "s/3", "t/1"]:
            any_store.put(key, b"x")
        assert _keys(any_store, "s/", start_after="s/1") == ["s/2", "s/3"]
        assert _keys(any_store, "s/", start_after="s/15") == ["s/2", "s/3"]
        assert _keys(any_store, "s/", start_after="s/3") == []
        assert _keys(any_store, "s/", start_after="a") == ["s/1", "s/2", "s/3"]
        assert _keys(any_store, "s/", start_after="z") == []

    def test_pages_hold_at_most_page_size_keys(self, any_store: ObjectStore) -> None:
        keys = [f"g/{i:02d}" for i in range(7)]
        for key in reversed(keys):
            any_store.put(key, b"x")
        pages = list(any_store.list_pages("g/", page_size=3))
        assert [[o.key for o in page] for page in pages] == [keys[0:3], keys[3:6], keys[6:]]
        pages = list(any_store.list_pages("g/", start_after="g/00", page_size=3))
        assert [len(page) for page in pages] == [3, 3]
        assert [len(page) for page in any_store.list_pages("g/", page_size=7)] == [7]

    def test_a_page_holds_at_most_1000_keys(self, subject: Subject) -> None:
        keys = [f"m/{i:04d}" for i in range(1001)]
        subject.seed(reversed(keys))
        pages = list(subject.store.list_pages("m/"))
        assert [len(page) for page in pages] == [1000, 1]
        assert [o.key for page in pages for o in page] == keys

    def test_list_prefixes_is_a_sorted_delimiter_listing(self, any_store: ObjectStore) -> None:
        for key in ["d/b/1", "d/a/1", "d/a/2/deep", "d/top", "d/c/", "e/x/1", "d"]:
            any_store.put(key, b"x")
        assert any_store.list_prefixes("d/") == ["d/a/", "d/b/", "d/c/"]
        assert any_store.list_prefixes("d/a/") == ["d/a/2/"]
        assert any_store.list_prefixes("") == ["d/", "e/"]
        assert any_store.list_prefixes("none/") == []

    def test_bad_arguments_are_refused_before_any_request(self, any_store: ObjectStore) -> None:
        any_store.put("v", b"0123")
        for page_size in (0, 1001):
            with pytest.raises(ValueError, match="page_size"):
                list(any_store.list_pages("v", page_size=page_size))
        for byte_range in ((-1, 2), (3, 2)):
            with pytest.raises(ValueError, match="byte range"):
                any_store.get("v", byte_range=byte_range)
        with pytest.raises(ValueError, match="etag"):
            any_store.put_if_match("v", b"x", "")
        with pytest.raises(ValueError, match="1000"):
            any_store.delete_batch([f"v{i}" for i in range(1001)])
        assert any_store.get("v").body == b"0123"

    # --- deletes -------------------------------------------------------------------

    def test_delete_removes_one_key_and_a_missing_key_is_fine(self, any_store: ObjectStore) -> None:
        any_store.put("x/1", b"x")
        any_store.put("x/2", b"x")
        any_store.delete("x/1")
        any_store.delete("x/1")
        any_store.delete("never")
        assert _keys(any_store, "x/") == ["x/2"]

    def test_delete_batch_confirms_every_key_missing_ones_too(self, any_store: ObjectStore) -> None:
        for key in ["b/1", "b/2", "keep"]:
            any_store.put(key, b"x")
        outcome = any_store.delete_batch(["b/2", "b/missing", "b/1"])
        assert (outcome.deleted, dict(outcome.failed), outcome.requests) == (
            ("b/2", "b/missing", "b/1"),
            {},
            1,
        )
        outcome.raise_for_failures()
        assert _keys(any_store, "") == ["keep"]

    def test_an_empty_delete_batch_sends_nothing(self, any_store: ObjectStore) -> None:
        outcome = any_store.delete_batch([])
        assert (outcome.deleted, dict(outcome.failed), outcome.requests) == ((), {}, 0)
        outcome = any_store.delete_many([])
        assert (outcome.deleted, dict(outcome.failed), outcome.requests) == ((), {}, 0)

    def test_delete_many_sends_one_request_per_1000_keys(self, subject: Subject) -> None:
        keys = [f"n/{i:04d}" for i in range(1001)]
        subject.seed([*keys, "keep/me"])
        outcome = subject.store.delete_many(iter(keys))
        assert sorted(outcome.deleted) == keys
        assert (dict(outcome.failed), outcome.requests) == ({}, 2)
        assert _keys(subject.store, "n/") == []
        assert _keys(subject.store, "keep/") == ["keep/me"]


# --- armed faults surface as the contract's typed errors --------------------------


def test_an_outage_fails_every_call_with_retries_exhausted() -> None:
    outage = OutageStore(MemoryStore(), prefix="o/")
    outage.put("o/k", b"v")
    outage.down = True
    for call in (
        lambda: outage.get("o/k"),
        lambda: outage.head("o/k"),
        lambda: outage.put_if_absent("o/new", b"v"),
        lambda: outage.put_if_match("o/k", b"v", _md5_etag(b"v")),
        lambda: outage.list_prefixes("o/"),
    ):
        with pytest.raises(RetriesExhaustedError, match="injected 503"):
            call()
    outage.put("p/k", b"elsewhere")
    outage.down = False
    assert _keys(outage, "") == ["o/k", "p/k"]


def test_faulty_store_errors_are_typed_and_leave_the_store_unchanged(
    store: S3ObjectStore,
) -> None:
    faulty = FaultyStore(store, FaultPlan(**{**NO_FAULTS.__dict__, "error": 1.0}), seed=1)
    with pytest.raises(RetriesExhaustedError):
        faulty.put_if_absent("k", b"v")
    with pytest.raises(RetriesExhaustedError):
        list(faulty.list_objects(""))
    outcome = faulty.delete_many(["k"])
    assert set(outcome.failed) == {"k"}
    with pytest.raises(DeleteFailedError):
        outcome.raise_for_failures()
    with pytest.raises(NotFoundError):
        store.head("k")


def test_s3_errors_that_outlast_the_retries_are_retries_exhausted(
    store: S3ObjectStore,
) -> None:
    store.put("k", b"v")
    injector = inject_http_errors(store.client, "GetObject", count=100)
    try:
        with pytest.raises(RetriesExhaustedError, match="GetObject failed after"):
            store.get("k")
    finally:
        injector.remove()
    assert store.get("k").body == b"v"
