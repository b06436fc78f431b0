"""JSON codecs of the node liveness lease and the partition ownership record
(docs/operating.md, "Nodes, ownership and balance"). Pure.

Node lease ``{root}/meta/nodes/{node_id}``::

    {"v": 1, "node": "reconciler-1", "incarnation": "5f0c...",
     "renewed_at": "2026-11-24T05:00:00.000Z",
     "expires_at": "2026-11-24T05:00:15.000Z", "released": true}

Ownership record ``{root}/meta/owners/{topic}/{revision}/{partition}``::

    {"v": 1, "node": "reconciler-1", "incarnation": "5f0c...", "term": 3,
     "updated_at": "2026-11-24T05:00:00.000Z", "released": true}

Like every other document: a version ``v``, unknown fields ignored, a ``v``
above this reader's refused (``UnsupportedVersionError``), anything else
that does not fit is ``MalformedRecordError``. ``released`` is written only
when true. The times are the writer's wall clock, for people: no decision
reads them (liveness is judged from ETag changes on the reader's monotonic
clock, as for ``leases.py``). A renewal must change the bytes (``renewed_at``
moves) so that the ETag, which is what other nodes watch, changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from epochgc.errors import MalformedRecordError
from epochgc.storage.documents import dump_document, get_int, get_str, load_document, parse_time
from epochgc.storage.keys import is_valid_node_id

NODE_LEASE_VERSION = 1
OWNER_RECORD_VERSION = 1


@dataclass(frozen=True)
class NodeLeaseDocument:
    """The content of a node's liveness lease."""

    node: str
    incarnation: str
    """Random per process start: a restarted node is a new owner, so its
    previous process's ownership records are not mistaken for its own."""
    renewed_at: datetime
    expires_at: datetime
    """The holder's wall-clock estimate, for display only."""
    released: bool = False
    """Given up on a clean stop: the node is gone at once."""


@dataclass(frozen=True)
class OwnerDocument:
    """The content of a partition's ownership record."""

    node: str
    incarnation: str
    term: int
    """The partition term of this owner: the fencing token of its
    partition-log entries. Grows by one at every change of owner."""
    updated_at: datetime
    released: bool = False
    """Handed back (or given up on stop): anyone whose own it is may take it
    at once, with ``term + 1``."""


def _time(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def _released(doc: dict[str, Any], where: str) -> bool:
    released = doc.get("released", False)
    if not isinstance(released, bool):
        raise MalformedRecordError(f"{where}: 'released' must be true or false")
    return released


def _node(doc: dict[str, Any], where: str) -> str:
    node = get_str(doc, "node", where)
    if not is_valid_node_id(node):
        raise MalformedRecordError(f"{where}: invalid node id node={node!r}")
    return node


def _incarnation(doc: dict[str, Any], where: str) -> str:
    incarnation = get_str(doc, "incarnation", where)
    if not incarnation:
        raise MalformedRecordError(f"{where}: empty incarnation")
    return incarnation


def encode_node_lease(doc: NodeLeaseDocument) -> bytes:
    """Node lease bytes (deterministic: equal documents, equal bytes)."""
    fields: dict[str, object] = {
        "v": NODE_LEASE_VERSION,
        "node": doc.node,
        "incarnation": doc.incarnation,
        "renewed_at": _time(doc.renewed_at),
        "expires_at": _time(doc.expires_at),
    }
    if doc.released:
        fields["released"] = True
    return dump_document(fields)


def decode_node_lease(data: bytes, where: str) -> NodeLeaseDocument:
    """Parse a node lease.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = load_document(data, where, NODE_LEASE_VERSION)
    return NodeLeaseDocument(
        node=_node(doc, where),
        incarnation=_incarnation(doc, where),
        renewed_at=parse_time(get_str(doc, "renewed_at", where), where),
        expires_at=parse_time(get_str(doc, "expires_at", where), where),
        released=_released(doc, where),
    )


def encode_owner(doc: OwnerDocument) -> bytes:
    """Ownership record bytes (deterministic)."""
    fields: dict[str, object] = {
        "v": OWNER_RECORD_VERSION,
        "node": doc.node,
        "incarnation": doc.incarnation,
        "term": doc.term,
        "updated_at": _time(doc.updated_at),
    }
    if doc.released:
        fields["released"] = True
    return dump_document(fields)


def decode_owner(data: bytes, where: str) -> OwnerDocument:
    """Parse an ownership record.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = load_document(data, where, OWNER_RECORD_VERSION)
    return OwnerDocument(
        node=_node(doc, where),
        incarnation=_incarnation(doc, where),
        term=get_int(doc, "term", where, 1),
        updated_at=parse_time(get_str(doc, "updated_at", where), where),
        released=_released(doc, where),
    )
