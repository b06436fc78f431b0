"""The object-store interface every other package talks to.

One small protocol, so that the collector, the logs and the leases never see
boto3, and so that tests and fault injectors can wrap a real store. The
semantics are S3's, including the two conditional writes epochgc's safety
rests on: create-only (``If-None-Match: *``) and compare-and-swap
(``If-Match: <etag>``).

This module holds types only; the boto3 implementation is ``storage.s3``.
A store tells whoever listens that the bucket asked it to slow down by
publishing ``Throttled`` on the ``EventChannel`` it was given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Protocol

from epochgc.errors import DeleteFailedError, NotFoundError
from epochgc.events import Event

MAX_KEYS_PER_DELETE = 1000
"""S3's limit on keys in one DeleteObjects request."""


@dataclass(frozen=True)
class ObjectInfo:
    """What a listing or HEAD says about an object."""

    key: str
    size: int
    etag: str
    last_modified: datetime


@dataclass(frozen=True)
class Throttled(Event):
    """The store answered SlowDown (or another throttling code), for a
    whole request or for some keys of a DeleteObjects batch; the request is
    retried or fails as usual. A sweeper lowers its delete rate on it."""

    operation: str
    """The S3 operation throttled (``DeleteObjects``, ``GetObject``, ...)."""


@dataclass(frozen=True)
class StoredObject:
    """An object's body with the version facts needed for a later CAS."""

    key: str
    body: bytes
    etag: str
    last_modified: datetime
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteOutcome:
    """Result of a batched delete.

    ``deleted`` holds every key S3 confirmed (a key that was already gone
    counts: DeleteObjects is idempotent). ``failed`` maps each key that could
    not be deleted, after bounded retries, to the last error code S3 gave.
    """

    deleted: tuple[str, ...]
    failed: Mapping[str, str]
    requests: int

    def raise_for_failures(self) -> None:
        """Raise ``DeleteFailedError`` if any key could not be deleted."""
        if self.failed:
            raise DeleteFailedError(self)

    @staticmethod
    def merge(outcomes: Iterable[DeleteOutcome]) -> DeleteOutcome:
        """Combine the outcomes of several batches into one."""
        deleted: list[str] = []
        failed: dict[str, str] = {}
        requests = 0
        for outcome in outcomes:
            deleted.extend(outcome.deleted)
            failed.update(outcome.failed)
            requests += outcome.requests
        return DeleteOutcome(tuple(deleted), failed, requests)


def key_batches(keys: Iterable[str], size: int = MAX_KEYS_PER_DELETE) -> Iterator[list[str]]:
    """``keys`` in lists of at most ``size`` (one DeleteObjects request
    each), read lazily so a long stream of keys is never held whole."""
    iterator = iter(keys)
    while batch := list(islice(iterator, size)):
        yield batch


def delete_in_batches(
    keys: Iterable[str], delete_batch: Callable[[list[str]], DeleteOutcome]
) -> DeleteOutcome:
    """``delete_many`` for a store (or a wrapper) that sends one batch at a
    time: ``delete_batch`` per batch of at most 1000 keys, outcomes merged."""
    return DeleteOutcome.merge(delete_batch(batch) for batch in key_batches(keys))


class PagedStore:
    """``list_objects`` and ``delete_many``, derived once from the two
    primitives every store and store wrapper implements itself
    (``list_pages`` and ``delete_batch``).

    Why a base class: the derivation is the same for S3, the simulated
    bucket and every fault-injecting wrapper, and a wrapper that guards
    ``delete_batch`` (the pause guard, a fault plan) must see every batch
    ``delete_many`` sends, which holds only if ``delete_many`` goes through
    ``self.delete_batch``.
    """

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[list[ObjectInfo]]:
        """One list of keys per LIST page; each store implements it."""
        raise NotImplementedError

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        """One DeleteObjects request; each store implements it."""
        raise NotImplementedError

    def list_objects(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[ObjectInfo]:
        """The keys of ``list_pages``, one at a time."""
        for page in self.list_pages(prefix, start_after=start_after, page_size=page_size):
            yield from page

    def delete_many(self, keys: Iterable[str]) -> DeleteOutcome:
        """``delete_batch`` per batch of at most 1000 keys, outcomes merged."""
        return delete_in_batches(keys, self.delete_batch)


class ObjectStore(Protocol):
    """A bucket, seen through the operations epochgc needs."""

    @property
    def bucket(self) -> str:
        """The bucket name."""
        ...

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None) -> StoredObject:
        """Read an object, or the inclusive byte range ``(first, last)`` of it.

        Raises:
            NotFoundError: no such key.
            RetriesExhaustedError: transient failures outlasted the policy.
        """
        ...

    def head(self, key: str) -> ObjectInfo:
        """Read an object's size, etag and age without its body.

        Raises:
            NotFoundError: no such key.
        """
        ...

    def put(self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None) -> str:
        """Write unconditionally; return the new etag."""
        ...

    def put_if_absent(
        self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        """Create ``key`` only if it does not exist (``If-None-Match: *``).

        After an unknown outcome (a timeout) the retry may find our own write
        and answer 412; callers that care compare the stored body.

        Raises:
            PreconditionFailedError: the key exists.
            ConflictError: a concurrent conditional write on the key.
        """
        ...

    def put_if_match(
        self, key: str, body: bytes, etag: str, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        """Replace ``key`` only if its current etag is ``etag`` (``If-Match``).

        Raises:
            PreconditionFailedError: the etag is no longer current.
            NotFoundError: the key does not exist.
            ConflictError: a concurrent conditional write on the key.
        """
        ...

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[list[ObjectInfo]]:
        """Lazily list keys under ``prefix`` in lexicographic order, page by page."""
        ...

    def list_objects(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[ObjectInfo]:
        """Lazily list keys under ``prefix`` in lexicographic order."""
        ...

    def list_prefixes(self, prefix: str) -> list[str]:
        """The distinct next path segments under ``prefix`` (a delimiter
        listing on ``/``: each returned prefix ends with ``/``), sorted. One
        LIST page per 1000 prefixes, however many keys sit below them."""
        ...

    def delete(self, key: str) -> None:
        """Delete one key (missing keys are not an error)."""
        ...

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        """Delete at most 1000 keys with one DeleteObjects request, retrying
        only the keys whose per-key errors are retryable."""
        ...

    def delete_many(self, keys: Iterable[str]) -> DeleteOutcome:
        """Delete any number of keys in batches of at most 1000."""
        ...


def get_or_none(
    store: ObjectStore, key: str, *, byte_range: tuple[int, int] | None = None
) -> StoredObject | None:
    """The object at ``key``, or ``None`` when there is none.

    For the many documents whose absence is a state, not an error (no lease
    taken yet, no snapshot written, no report published): the caller says
    what absence means in one ``if``, and every other failure still raises.
    """
    try:
        return store.get(key, byte_range=byte_range)
    except NotFoundError:
        return None


def head_or_none(store: ObjectStore, key: str) -> ObjectInfo | None:
    """What ``head`` says about ``key``, or ``None`` when there is no object."""
    try:
        return store.head(key)
    except NotFoundError:
        return None
