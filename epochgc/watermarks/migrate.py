"""Rewriting a root from bucket layout 1 to layout 2 (``epochgc migrate``).

Layout 1 keyed partition metadata and L1 objects by topic name only
(``{topic}/{partition}``); layout 2 by incarnation
(``{topic}/{revision}/{partition}``). The controller log, L0 objects, run
summaries and the control document are the same in both.

Steps, with every node and daemon stopped (a held partition lease refuses):

1. Read the controller: the live topics and their revisions.
2. For each layout-1 partition of a live topic whose snapshot holds the live
   revision, copy its snapshot (with its covered-offset metadata) and log
   entries, then its L1 objects, under the revision. Copies are create-only
   and idempotent, so a migration that stopped half-way can be run again.
3. Partitions of deleted topics, and those whose snapshot holds another
   revision (a name deleted and created again under layout 1, whose state
   was already mixed up), are not copied: they are reported as abandoned.
4. Delete every layout-1 key and every ``partition.*`` lease (new nodes take
   leases under the new names), then write the layout marker.

Node reports of version 1 stay: they count for nothing (their partitions
fall back to ``revision - 1``, which is safe) until nodes publish version 2.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from epochgc.errors import (
    InvalidArgumentError,
    NotFoundError,
    PreconditionFailedError,
    RecordError,
)
from epochgc.leases.role_leases import decode_lease
from epochgc.storage.keys import (
    PartitionId,
    l1_prefix,
    lease_key,
    partition_meta_prefix,
    partitions_prefix,
)
from epochgc.storage.object_store import ObjectStore, get_or_none
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.layout import (
    LAYOUT,
    KeyLayout,
    classify_l1_key,
    classify_partition_key,
    decode_layout_marker,
    layout_marker_key,
    write_layout_marker,
)
from epochgc.watermarks.partition.codec import decode_snapshot

log = logging.getLogger(__name__)


@dataclass
class MigrationReport:
    """What a migration did."""

    already_current: bool = False
    partitions_migrated: list[str] = field(default_factory=list)
    partitions_abandoned: list[str] = field(default_factory=list)
    objects_copied: int = 0
    objects_deleted: int = 0
    leases_deleted: int = 0


def migrate_layout(
    store: ObjectStore,
    root: str,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> MigrationReport:
    """Rewrite ``root`` to the current layout (see the module docstring).

    Raises:
        InvalidArgumentError: a partition lease is still held (stop every
            node first, or wait until its lease has expired).
    """
    report = MigrationReport()
    marker = layout_marker_key(root)
    stored = get_or_none(store, marker)
    if stored is not None and decode_layout_marker(stored.body, marker) == LAYOUT:
        report.already_current = True
        return report
    leases = _partition_leases(store, root, now())
    view = Controller(store, root).snapshot()
    old_meta = [
        info.key
        for info in store.list_objects(partitions_prefix(root))
        if classify_partition_key(info.key, root) is KeyLayout.V1
    ]
    old_l1 = [
        info.key
        for info in store.list_objects(l1_prefix(root))
        if classify_l1_key(info.key, root) is KeyLayout.V1
    ]
    groups: dict[tuple[str, int], list[str]] = {}
    for key in old_meta:
        topic, partition, _rest = _split_v1(key, partitions_prefix(root))
        groups.setdefault((topic, partition), []).append(key)
    migrated: dict[tuple[str, int], PartitionId] = {}
    for (topic, partition), keys in sorted(groups.items()):
        info = view.topics.get(topic)
        label = f"{topic}/{partition}"
        if info is None or partition >= info.partitions:
            report.partitions_abandoned.append(f"{label} (topic deleted)")
            continue
        pid = info.partition_id(partition)
        held = _snapshot_revision(store, f"{partitions_prefix(root)}{topic}/{partition}/snapshot")
        if held != info.revision:
            report.partitions_abandoned.append(
                f"{label} (state of revision {held}, live revision {info.revision})"
            )
            continue
        for key in keys:
            _, _, rest = _split_v1(key, partitions_prefix(root))
            report.objects_copied += _copy(store, key, f"{partition_meta_prefix(root, pid)}{rest}")
        migrated[(topic, partition)] = pid
        report.partitions_migrated.append(str(pid))
    for key in old_l1:
        topic, partition, name = _split_v1(key, l1_prefix(root))
        target = migrated.get((topic, partition))
        if target is not None:
            new_key = f"{l1_prefix(root)}{topic}/{target.revision}/{partition}/{name}"
            report.objects_copied += _copy(store, key, new_key)
    victims = [*old_meta, *old_l1]
    if victims:
        outcome = store.delete_many(victims)
        outcome.raise_for_failures()
        report.objects_deleted = len(outcome.deleted)
    if leases:
        outcome = store.delete_many(leases)
        outcome.raise_for_failures()
        report.leases_deleted = len(outcome.deleted)
    write_layout_marker(store, root)
    for item in report.partitions_abandoned:
        log.warning("not migrated: %s", item)
    log.info(
        "migrated %d partitions to layout %d (%d objects copied, %d deleted, %d leases removed)",
        len(report.partitions_migrated),
        LAYOUT,
        report.objects_copied,
        report.objects_deleted,
        report.leases_deleted,
    )
    return report


def _split_v1(key: str, prefix: str) -> tuple[str, int, str]:
    topic, partition, rest = key[len(prefix) :].split("/", 2)
    return topic, int(partition), rest


def _snapshot_revision(store: ObjectStore, key: str) -> int | None:
    stored = get_or_none(store, key)
    if stored is None:
        return None
    try:
        return decode_snapshot(stored.body, key).state.revision
    except RecordError as err:
        log.warning("unreadable layout-1 snapshot %s: %s", key, err)
        return None


def _copy(store: ObjectStore, source: str, target: str) -> int:
    """Copy one object create-only, with its user metadata; an identical
    copy from an earlier run counts as done."""
    stored = store.get(source)
    try:
        store.put_if_absent(target, stored.body, metadata=stored.metadata)
    except PreconditionFailedError:
        if store.get(target).body != stored.body:
            raise InvalidArgumentError(
                f"{target} exists with other content; refusing to overwrite it"
            ) from None
        return 0
    return 1


def _partition_leases(store: ObjectStore, root: str, now: datetime) -> list[str]:
    """Every ``partition.*`` lease key; refuses while one is still held."""
    prefix = lease_key(root, "partition.x")[: -len("x")]
    keys = [info.key for info in store.list_objects(prefix)]
    for key in keys:
        try:
            doc = decode_lease(store.get(key).body, key)
        except (NotFoundError, RecordError):
            continue
        if not doc.released and doc.expires_at > now:
            raise InvalidArgumentError(
                f"lease {key} is held by {doc.holder} until {doc.expires_at:%H:%M:%S}Z; "
                "stop every node and daemon before migrating"
            )
    return keys
