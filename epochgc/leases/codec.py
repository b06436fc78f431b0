"""JSON codecs of the three holder documents (docs/contract.md, "Leases" and
"Node leases and ownership records"). Pure.

Role lease ``{root}/meta/leases/{name}`` (``gc``, ``ticker``)::

    {"v": 1, "holder": "reconciler-1/5f0c3b6e9a2d", "term": 3,
     "expires_at": "2026-11-22T03:00:05.000Z", "released": true}

Node lease ``{root}/meta/nodes/{node_id}``::

    {"v": 1, "node": "reconciler-1", "incarnation": "5f0c...",
     "renewed_at": "2026-11-24T05:00:00.000Z",
     "expires_at": "2026-11-24T05:00:15.000Z", "released": true}

Ownership record ``{root}/meta/owners/{topic}/{revision}/{partition}``::

    {"v": 1, "node": "reconciler-1", "incarnation": "5f0c...", "term": 3,
     "updated_at": "2026-11-24T05:00:00.000Z", "released": true}

The three name their holder differently (their fields are a public
contract, so they stay as they are), but are written by one rule
(``_encode``): a version ``v``, times in UTC to the millisecond, and
``released`` only when true, so a held document reads as it always did.
Like every other document: unknown fields ignored, a ``v`` above this
reader's refused (``UnsupportedVersionError``), anything else that does not
fit is ``MalformedRecordError``. The times are the writer's wall clock, for
people: no decision reads them (liveness is judged from ETag changes on the
reader's monotonic clock, ``timing.py``). A renewal must change the bytes
(a time moves) so that the ETag, which is what others watch, changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from epochgc.errors import MalformedRecordError
from epochgc.storage.documents import dump_document, get_int, get_str, load_document, parse_time
from epochgc.storage.keys import is_valid_node_id

LEASE_VERSION = 1
NODE_LEASE_VERSION = 1
OWNER_RECORD_VERSION = 1


@dataclass(frozen=True)
class LeaseDocument:
    """The content of a role lease (``gc``, ``ticker``)."""

    holder: str
    """``{node_id}/{random}``: a restarted process never mistakes an old
    grant for its own."""
    term: int
    """Grows at every change of holder."""
    expires_at: datetime
    """The holder's wall-clock estimate, for display only."""
    released: bool = False
    """Given up by its holder: anyone may take it at once."""

    def who(self) -> str:
        """The holder, for log lines."""
        return f"{self.holder} at term {self.term}"


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

    def who(self) -> str:
        """The holder, for log lines."""
        return f"{self.node} (incarnation {self.incarnation})"


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
    """RFC 3339 UTC to the millisecond (the contract's precision for leases)."""
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def _encode(version: int, fields: dict[str, object], released: bool) -> bytes:
    """Deterministic bytes of a holder document: ``released`` only when true."""
    if released:
        fields = {**fields, "released": True}
    return dump_document({"v": version, **fields})


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


def _time_field(doc: dict[str, Any], name: str, where: str) -> datetime:
    return parse_time(get_str(doc, name, where), where)


def encode_lease(doc: LeaseDocument) -> bytes:
    """Role lease bytes (deterministic)."""
    fields: dict[str, object] = {
        "holder": doc.holder,
        "term": doc.term,
        "expires_at": _time(doc.expires_at),
    }
    return _encode(LEASE_VERSION, fields, doc.released)


def decode_lease(data: bytes, where: str) -> LeaseDocument:
    """Parse a role lease.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = load_document(data, where, LEASE_VERSION)
    return LeaseDocument(
        holder=get_str(doc, "holder", where),
        term=get_int(doc, "term", where, 1),
        expires_at=_time_field(doc, "expires_at", where),
        released=_released(doc, where),
    )


def encode_node_lease(doc: NodeLeaseDocument) -> bytes:
    """Node lease bytes (deterministic: equal documents, equal bytes)."""
    fields: dict[str, object] = {
        "node": doc.node,
        "incarnation": doc.incarnation,
        "renewed_at": _time(doc.renewed_at),
        "expires_at": _time(doc.expires_at),
    }
    return _encode(NODE_LEASE_VERSION, fields, doc.released)


def decode_node_lease(data: bytes, where: str) -> NodeLeaseDocument:
    """Parse a node lease.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = load_document(data, where, NODE_LEASE_VERSION)
    return NodeLeaseDocument(
        node=_node(doc, where),
        incarnation=_incarnation(doc, where),
        renewed_at=_time_field(doc, "renewed_at", where),
        expires_at=_time_field(doc, "expires_at", where),
        released=_released(doc, where),
    )


def encode_owner(doc: OwnerDocument) -> bytes:
    """Ownership record bytes (deterministic)."""
    fields: dict[str, object] = {
        "node": doc.node,
        "incarnation": doc.incarnation,
        "term": doc.term,
        "updated_at": _time(doc.updated_at),
    }
    return _encode(OWNER_RECORD_VERSION, fields, doc.released)


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
        updated_at=_time_field(doc, "updated_at", where),
        released=_released(doc, where),
    )
