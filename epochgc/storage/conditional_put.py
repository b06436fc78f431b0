"""One conditional write whose lost answer is told apart from a lost race.

A create-only or compare-and-swap PUT can land and still answer with an
error (a timeout, then a retry that finds the key changed and gets 412).
Whoever writes by CAS must then re-read: the write counts as done only if
the stored bytes are exactly the ones sent, never because the stored
document merely names the same holder or term. This module is the one place
new writers get that rule from.
"""

from __future__ import annotations

from epochgc.errors import NotFoundError, PreconditionFailedError
from epochgc.storage.object_store import ObjectStore


def put_conditionally(store: ObjectStore, key: str, body: bytes, etag: str | None) -> str | None:
    """Create ``key`` (``etag`` is ``None``) or replace the version ``etag``
    with ``body``; return the new ETag, or ``None`` when the condition
    failed and the object does not hold ``body`` (someone else moved first,
    or the store rejected the condition).

    Raises:
        StorageError: any other failure of the write or of the re-read.
    """
    try:
        if etag is None:
            return store.put_if_absent(key, body)
        return store.put_if_match(key, body, etag)
    except (PreconditionFailedError, NotFoundError):
        try:
            stored = store.get(key)
        except NotFoundError:
            return None
        return stored.etag if stored.body == body else None
