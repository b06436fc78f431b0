"""The janitor: removes what deleted topic incarnations leave behind.

A topic incarnation ``(topic, revision)`` owns its partitions' logs and
snapshots (``{root}/meta/partitions/{topic}/{revision}/``), its L1 objects
(``{root}/l1/{topic}/{revision}/``), its ownership records
(``{root}/meta/owners/{topic}/{revision}/``) and, in a bucket from before
node ownership, its old partition leases
(``{root}/meta/leases/partition.{topic}.{revision}.{p}``). Once the
incarnation is no longer live, nothing reads them: a recreated topic is a
new incarnation with keys of its own. Its L0 objects go by ``M`` as before.

Old partition leases of live incarnations go too once their partition has
an ownership record: the lease is read only when the partition's first
record is created (its term starts above the lease's), never after.

Safety rule (``dead_incarnations``, pure): an incarnation is removed only if
its revision is at or below the controller offset of the view it was judged
against *and* that view does not hold it live. A topic created after the
view has a revision above its offset, so it is never touched, however the
listing and the view interleave; a live incarnation is never touched
because liveness is exactly what the view says. Work is bounded per pass
(``max_deletes``); the rest waits for the next pass, and nothing depends on
the janitor for safety.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from epochgc.storage.keys import (
    LEGACY_PARTITION_LEASE_PREFIX,
    PartitionId,
    l1_prefix,
    lease_key,
    legacy_partition_lease_key,
    owner_key,
    owners_prefix,
    partitions_prefix,
    topic_l1_prefix,
    topic_meta_prefix,
)
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import ControllerView

log = logging.getLogger(__name__)

Incarnation = tuple[str, int]


def dead_incarnations(present: Iterable[Incarnation], view: ControllerView) -> list[Incarnation]:
    """The incarnations among ``present`` that ``view`` proves deleted. Pure."""
    dead = set()
    for topic, revision in present:
        info = view.topics.get(topic)
        live = info is not None and info.revision == revision
        if revision <= view.offset and not live:
            dead.add((topic, revision))
    return sorted(dead)


@dataclass(frozen=True)
class JanitorResult:
    """What one pass removed (the ``janitor`` object of a run summary)."""

    incarnations: int = 0
    """Deleted incarnations found with something left to remove."""
    objects_deleted: int = 0
    complete: bool = True
    """False when the pass stopped at ``max_deletes`` with work left."""


class Janitor:
    """One bounded pass over the bucket's incarnations.

    Example::

        result = Janitor(store, "epochgc").run_once(controller.snapshot())
    """

    def __init__(self, store: ObjectStore, root: str, *, max_deletes: int = 10_000) -> None:
        if max_deletes < 1:
            raise ValueError("max_deletes must be >= 1")
        self._store = store
        self._root = root
        self._max_deletes = max_deletes

    def present(self) -> set[Incarnation]:
        """Every incarnation with partition metadata or L1 objects (delimiter
        listings: one LIST per topic name, not per object)."""
        found: set[Incarnation] = set()
        for base in (
            partitions_prefix(self._root),
            l1_prefix(self._root),
            owners_prefix(self._root),
        ):
            for topic_prefix in self._store.list_prefixes(base):
                topic = topic_prefix[len(base) : -1]
                for revision_prefix in self._store.list_prefixes(topic_prefix):
                    text = revision_prefix[len(topic_prefix) : -1]
                    if text.isdigit() and not text.startswith("0"):
                        found.add((topic, int(text)))
        return found

    def run_once(self, view: ControllerView) -> JanitorResult:
        """Remove what deleted incarnations left, up to ``max_deletes`` keys.

        Raises:
            StorageError: the store failed; the next pass goes on from there.
        """
        budget = self._max_deletes
        deleted = 0
        touched = 0
        for topic, revision in dead_incarnations(self.present(), view):
            keys = self._keys_of(topic, revision, budget)
            if not keys:
                continue
            touched += 1
            self._store.delete_many(keys).raise_for_failures()
            deleted += len(keys)
            budget -= len(keys)
            log.info("janitor: deleted %d objects of %s@%d", len(keys), topic, revision)
            if budget <= 0:
                return JanitorResult(touched, deleted, complete=False)
        superseded = self._superseded_leases(view, budget)
        if superseded:
            self._store.delete_many(superseded).raise_for_failures()
            deleted += len(superseded)
            log.info("janitor: deleted %d superseded partition leases", len(superseded))
            if len(superseded) >= budget:
                return JanitorResult(touched, deleted, complete=False)
        return JanitorResult(touched, deleted)

    def _superseded_leases(self, view: ControllerView, limit: int) -> list[str]:
        """Old partition leases of live partitions that have an ownership
        record (one LIST of the old leases, usually empty; a HEAD-free
        check per lease: the record's key is listed)."""
        prefix = lease_key(self._root, f"{LEGACY_PARTITION_LEASE_PREFIX}x")[: -len("x")]
        old = [info.key for info in self._store.list_objects(prefix)]
        if not old:
            return []
        by_key = {
            legacy_partition_lease_key(self._root, pid): pid for pid in view.live_partitions()
        }
        records = {info.key for info in self._store.list_objects(owners_prefix(self._root))}
        out: list[str] = []
        for key in old:
            pid: PartitionId | None = by_key.get(key)
            if pid is not None and owner_key(self._root, pid) in records:
                out.append(key)
                if len(out) >= limit:
                    break
        return out

    def _keys_of(self, topic: str, revision: int, limit: int) -> list[str]:
        keys: list[str] = []
        leases = lease_key(self._root, f"partition.{topic}.{revision}.x")[: -len("x")]
        for prefix in (
            topic_meta_prefix(self._root, topic, revision),
            topic_l1_prefix(self._root, topic, revision),
            f"{owners_prefix(self._root)}{topic}/{revision}/",
            leases,
        ):
            for info in self._store.list_objects(prefix):
                # Lease names are dotted: "partition.a.1." is also a prefix of
                # topic "a.1"'s leases; only a bare partition number follows ours.
                if prefix == leases and not info.key[len(prefix) :].isdigit():
                    continue
                if len(keys) >= limit:
                    return keys
                keys.append(info.key)
        return keys
