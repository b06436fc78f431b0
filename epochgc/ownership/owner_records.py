"""Conditional writes of ownership records
``{root}/meta/owners/{topic}/{revision}/{partition}`` (docs/operating.md,
"Nodes, ownership and balance").

* take a partition with no record: create-only (``If-None-Match: *``),
  term 1, or one above the term of the partition's lease from the
  per-partition lease design when a bucket from that design still holds
  one (read once, here; the old lease is never read again afterwards);
* take a released record, or take one over from an owner that is not
  live: ``If-Match`` the ETag seen, term + 1 (the new owner's
  ``term_start`` then fences the old one's late log entries);
* hand back or give up on stop: ``If-Match`` the ETag we wrote, same term,
  ``released: true``;
* raise our own term (the partition log already holds a term at or above
  the record's, e.g. a leader whose append failed spent its term):
  ``If-Match`` the ETag we wrote, the new term.

A 412 or 404 is checked by re-reading: the write counts only if the object
holds exactly our bytes (it landed, only its answer was lost). Otherwise
someone else moved first, which is routine, and the caller re-reads the
record at its next round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from epochgc.errors import RecordError
from epochgc.leases.holder_codec import OwnerDocument, decode_owner, encode_owner
from epochgc.leases.role_leases import decode_lease
from epochgc.ownership.assignment import OwnerRecord
from epochgc.storage.conditional_put import put_conditionally
from epochgc.storage.keys import (
    LEGACY_PARTITION_LEASE_PREFIX,
    PartitionId,
    lease_key,
    legacy_partition_lease_key,
    owner_key,
)
from epochgc.storage.object_store import ObjectStore, get_or_none

log = logging.getLogger(__name__)


class OwnershipStore:
    """The CAS writes of ownership records.

    Example::

        owners = OwnershipStore(store, "epochgc")
        record = owners.take(pid, seen=None, node="n1", incarnation="ab12")
        owners.release(pid, record)
    """

    def __init__(self, store: ObjectStore, root: str, *, now: Callable[[], datetime]) -> None:
        self._store = store
        self._root = root
        self._now = now
        self._legacy_keys: set[str] | None = None
        """Old per-partition lease keys, listed at the first creation."""

    def take(
        self, pid: PartitionId, seen: OwnerRecord | None, node: str, incarnation: str
    ) -> OwnerRecord | None:
        """Make ``node``'s ``incarnation`` the owner; ``None`` if someone
        moved first.

        Raises:
            StorageError: the store failed (outcome unknown: re-read next round).
        """
        term = self._legacy_term(pid) + 1 if seen is None else seen.term + 1
        body = encode_owner(OwnerDocument(node, incarnation, term, self._now()))
        key = owner_key(self._root, pid)
        etag = self._write(key, body, None if seen is None else seen.etag)
        return None if etag is None else OwnerRecord(node, incarnation, term, False, etag)

    def raise_term(self, pid: PartitionId, held: OwnerRecord, term: int) -> OwnerRecord | None:
        """Move our record to ``term`` (above ``held.term``); ``None`` if it
        is no longer ours as we wrote it.

        Raises:
            StorageError: the store failed.
        """
        if term <= held.term:
            raise ValueError(f"term {term} is not above the record's {held.term}")
        body = encode_owner(OwnerDocument(held.node, held.incarnation, term, self._now()))
        etag = self._write(owner_key(self._root, pid), body, held.etag)
        return None if etag is None else OwnerRecord(held.node, held.incarnation, term, False, etag)

    def _legacy_term(self, pid: PartitionId) -> int:
        """The term of the partition's lease from the per-partition lease
        design, 0 when there is none. The old leases are listed once (one
        LIST, empty in a bucket that never had them) and only those listed
        are read. An unreadable one counts as 0, and so does one written
        after the listing (old and new nodes must not share a root): the
        new leader still opens the partition log and starts above the
        highest term it finds there."""
        key = legacy_partition_lease_key(self._root, pid)
        if self._legacy_keys is None:
            prefix = lease_key(self._root, f"{LEGACY_PARTITION_LEASE_PREFIX}x")[: -len("x")]
            self._legacy_keys = {info.key for info in self._store.list_objects(prefix)}
        if key not in self._legacy_keys:
            return 0
        stored = get_or_none(self._store, key)
        if stored is None:
            return 0
        try:
            return decode_lease(stored.body, key).term
        except RecordError as err:
            log.warning("ignoring unreadable old partition lease %s: %s", key, err)
            return 0

    def release(self, pid: PartitionId, held: OwnerRecord) -> OwnerRecord | None:
        """Mark our record released (same term); ``None`` if it is no
        longer ours as we wrote it.

        Raises:
            StorageError: the store failed.
        """
        doc = OwnerDocument(held.node, held.incarnation, held.term, self._now(), released=True)
        body = encode_owner(doc)
        etag = self._write(owner_key(self._root, pid), body, held.etag)
        return (
            None
            if etag is None
            else OwnerRecord(held.node, held.incarnation, held.term, True, etag)
        )

    def _write(self, key: str, body: bytes, etag: str | None) -> str | None:
        written = put_conditionally(self._store, key, body, etag)
        if written is None:
            log.info("ownership record %s changed first", key)
        return written


def read_owner(store: ObjectStore, root: str, pid: PartitionId) -> OwnerDocument | None:
    """The ownership record of ``pid`` as stored (``None``: never owned),
    for displays and error messages. Whether its owner is still alive is
    its node lease's business (``epochgc node list``).

    Raises:
        MalformedRecordError, UnsupportedVersionError, StorageError.
    """
    key = owner_key(root, pid)
    stored = get_or_none(store, key)
    return None if stored is None else decode_owner(stored.body, key)
