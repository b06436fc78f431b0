"""Which bucket layout a root was written with, and refusing the wrong one.

Layout 2 keys every partition's metadata and L1 objects by its topic
incarnation (``.../{topic}/{revision}/{partition}/...``). Code of layout 2
opening a root written by layout 1 (``.../{topic}/{partition}/...``) would
not see the old partition logs: it would start every partition afresh, let
``M`` pass the epochs of old, unreconciled placeholders, and the collector
would delete data nobody has reconciled. So every command that reads or
writes partition state first calls ``ensure_layout``:

1. ``{root}/meta/layout.json`` says ``{"v": 1, "layout": 2}``: go (one GET;
   the usual case).
2. No marker: look for layout-1 keys, the first key under
   ``{root}/meta/partitions/`` and under ``{root}/l1/`` (a root is all one
   layout, so the first key tells). Found: refuse, naming ``epochgc
   migrate``. None: write the marker (create-only) and go.
3. A marker naming a layout this code does not know: refuse.

The pure part (``classify_partition_key``, ``classify_l1_key``) has no I/O.
"""

from __future__ import annotations

import contextlib
import logging
from enum import Enum

from epochgc.errors import (
    LayoutMismatchError,
    MalformedRecordError,
    PreconditionFailedError,
    UnsupportedVersionError,
)
from epochgc.storage import documents
from epochgc.storage.keys import l1_prefix, partitions_prefix
from epochgc.storage.object_store import ObjectStore, get_or_none

log = logging.getLogger(__name__)

LAYOUT = 2
"""The bucket layout this code writes."""
LAYOUT_MARKER_VERSION = 1
MIGRATE_COMMAND = "epochgc migrate"


class KeyLayout(Enum):
    """Which layout a metadata or L1 key belongs to."""

    V1 = 1
    V2 = 2
    UNKNOWN = 0


def layout_marker_key(root: str) -> str:
    """Key of the layout marker of ``root``."""
    return f"{root}/meta/layout.json"


def classify_partition_key(key: str, root: str) -> KeyLayout:
    """Layout of a key under ``{root}/meta/partitions/``. Pure.

    Layout 1: ``{topic}/{partition}/log/...`` or ``{topic}/{partition}/snapshot``;
    layout 2 has one more segment, the revision, before the partition.
    """
    rest = key.removeprefix(partitions_prefix(root)).split("/")
    if len(rest) >= 3 and rest[2] in ("log", "snapshot") and rest[1].isdigit():
        return KeyLayout.V1
    if len(rest) >= 4 and rest[3] in ("log", "snapshot") and rest[1].isdigit():
        return KeyLayout.V2
    return KeyLayout.UNKNOWN


def classify_l1_key(key: str, root: str) -> KeyLayout:
    """Layout of a key under ``{root}/l1/``. Pure.

    Layout 1: ``{topic}/{partition}/{name}``; layout 2:
    ``{topic}/{revision}/{partition}/{name}``.
    """
    rest = key.removeprefix(l1_prefix(root)).split("/")
    if len(rest) == 3 and rest[1].isdigit():
        return KeyLayout.V1
    if len(rest) == 4 and rest[1].isdigit() and rest[2].isdigit():
        return KeyLayout.V2
    return KeyLayout.UNKNOWN


def encode_layout_marker(layout: int) -> bytes:
    """The marker's bytes."""
    return documents.dump_document({"v": LAYOUT_MARKER_VERSION, "layout": layout})


def decode_layout_marker(data: bytes, where: str) -> int:
    """The layout a marker names.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = documents.load_document(data, where, LAYOUT_MARKER_VERSION)
    return documents.get_int(doc, "layout", where, 1)


def detect_old_layout(store: ObjectStore, root: str) -> str | None:
    """A layout-1 key under ``root``, if the first keys show one (two LISTs)."""
    first = next(iter(store.list_objects(partitions_prefix(root))), None)
    if first is not None and classify_partition_key(first.key, root) is KeyLayout.V1:
        return first.key
    first = next(iter(store.list_objects(l1_prefix(root))), None)
    if first is not None and classify_l1_key(first.key, root) is KeyLayout.V1:
        return first.key
    return None


def write_layout_marker(store: ObjectStore, root: str) -> None:
    """Record that ``root`` is in the current layout (create-only: a marker
    that exists already is left as it is)."""
    with contextlib.suppress(PreconditionFailedError):
        store.put_if_absent(layout_marker_key(root), encode_layout_marker(LAYOUT))


def ensure_layout(store: ObjectStore, root: str) -> None:
    """Go on only if ``root`` is in this code's layout (see the module docstring).

    Raises:
        LayoutMismatchError: the root holds layout-1 data, or a marker of a
            layout this code does not know.
    """
    key = layout_marker_key(root)
    stored = get_or_none(store, key)
    try:
        layout = None if stored is None else decode_layout_marker(stored.body, key)
    except (MalformedRecordError, UnsupportedVersionError) as err:
        raise LayoutMismatchError(f"unreadable layout marker: {err}") from err
    if layout == LAYOUT:
        return
    if layout is not None:
        raise LayoutMismatchError(
            f"{key} says layout {layout}; this epochgc writes layout {LAYOUT}: "
            "upgrade epochgc, or restore the marker"
        )
    old = detect_old_layout(store, root)
    if old is not None:
        raise LayoutMismatchError(
            f"bucket {store.bucket!r} root {root!r} was written by an older epochgc "
            f"(layout 1, before topic incarnations; e.g. {old}); stop every node and "
            f"daemon, then run `{MIGRATE_COMMAND}` to rewrite it"
        )
    write_layout_marker(store, root)
    log.debug("root %s: layout marker written (layout %d)", root, LAYOUT)
