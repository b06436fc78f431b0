"""One conditional write whose lost answer is told apart from a lost race.

A create-only or compare-and-swap PUT can land and still answer with an
error (a timeout, then a retry that finds the key changed and gets 412).
Whoever writes by CAS must then re-read: the write counts as done only if
the stored bytes are exactly the ones sent, never because the stored
document merely names the same holder or term. This module is the one place
new writers get that rule from.

The lost answer can also be noticed one write later: a renewal times out
after it landed, and the next renewal's ``If-Match`` still names the
version before it. A writer keeps the bodies of its unanswered writes and
passes them as ``unanswered``: an object holding one of them is still the
writer's own (nobody wrote after it), so the write goes again over it.
"""

from __future__ import annotations

from collections.abc import Collection

from epochgc.errors import NotFoundError, PreconditionFailedError
from epochgc.storage.object_store import ObjectStore, get_or_none

UNANSWERED_KEPT = 8
"""Unanswered bodies a writer remembers (a lease runs out after a few)."""


def remember_unanswered(bodies: list[bytes], body: bytes) -> list[bytes]:
    """``bodies`` and ``body``, the oldest dropped past ``UNANSWERED_KEPT``."""
    return [*bodies[-(UNANSWERED_KEPT - 1) :], body]


def put_conditionally(
    store: ObjectStore,
    key: str,
    body: bytes,
    etag: str | None,
    *,
    unanswered: Collection[bytes] = (),
) -> str | None:
    """Create ``key`` (``etag`` is ``None``) or replace the version ``etag``
    with ``body``; return the new ETag, or ``None`` when the condition
    failed and the object holds neither ``body`` nor one of the caller's
    ``unanswered`` earlier bodies (someone else moved first, or the store
    rejected the condition). When it holds an ``unanswered`` body, ``body``
    is written over that version instead.

    Raises:
        StorageError: any other failure of the write or of the re-read.
    """
    try:
        if etag is None:
            return store.put_if_absent(key, body)
        return store.put_if_match(key, body, etag)
    except (PreconditionFailedError, NotFoundError):
        stored = get_or_none(store, key)
        if stored is None:
            return None
        if stored.body == body:
            return stored.etag
        if stored.body in unanswered:
            return put_conditionally(store, key, body, stored.etag)
        return None
