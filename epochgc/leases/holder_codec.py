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
contract, so they stay as they are), but are one codec (``HolderCodec``)
given each document's fields: a version ``v``, times in UTC to the
millisecond, and ``released`` only when true, so a held document reads as
it always did.
Like every other document: unknown fields ignored, a ``v`` above this
reader's refused (``UnsupportedVersionError``), anything else that does not
fit is ``MalformedRecordError``. The times are the writer's wall clock, for
people: no decision reads them (liveness is judged from ETag changes on the
reader's monotonic clock, ``timing.py``). A renewal must change the bytes
(a time moves) so that the ETag, which is what others watch, changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, Protocol, TypeVar

from epochgc.errors import MalformedRecordError
from epochgc.storage import documents
from epochgc.storage.keys import is_valid_node_id

ASSIGNMENT_VERSION = 2
"""The assignment this code computes by default (``ownership.assignment``
says what each version is); a node lease advertises it."""
OLDEST_ASSIGNMENT_VERSION = 1
"""A node lease without an ``assignment`` field was written by a node that
computes version 1."""


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
    assignment: int = OLDEST_ASSIGNMENT_VERSION
    """The newest assignment version the node computes
    (``ownership.assignment``); absent (1) in leases written before it existed."""

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


FieldKind = Literal["holder", "node", "incarnation", "term", "time", "version"]
"""How a field is written and checked: ``holder`` any string, ``node`` a
valid node id, ``incarnation`` a non-empty string, ``term`` an integer
>= 1, ``time`` RFC 3339 UTC to the millisecond, ``version`` an integer >= 1
that may be absent (read as 1: a field added after the document's v1)."""


def _read(kind: FieldKind, doc: dict[str, Any], name: str, where: str) -> object:
    if kind == "term":
        return documents.get_int(doc, name, where, 1)
    if kind == "version":
        return documents.get_int(doc, name, where, 1) if name in doc else 1
    value = documents.get_str(doc, name, where)
    if kind == "time":
        return documents.parse_time(value, where)
    if kind == "node" and not is_valid_node_id(value):
        raise MalformedRecordError(f"{where}: invalid node id {name}={value!r}")
    if kind == "incarnation" and not value:
        raise MalformedRecordError(f"{where}: empty incarnation")
    return value


class _Released(Protocol):
    @property
    def released(self) -> bool: ...


T = TypeVar("T", bound=_Released)


@dataclass(frozen=True)
class HolderCodec(Generic[T]):
    """The codec of one holder document: its version and its fields (in
    the order they are checked), plus ``released``, written only when true."""

    document: Callable[..., T]
    version: int
    fields: Mapping[str, FieldKind]

    def encode(self, doc: T) -> bytes:
        """The document's bytes (deterministic: equal documents, equal bytes).

        Raises:
            ValueError: a time without a timezone.
        """
        values: dict[str, object] = {"v": self.version}
        for name, kind in self.fields.items():
            value = getattr(doc, name)
            values[name] = (
                documents.format_time(value, precision="milliseconds") if kind == "time" else value
            )
        if doc.released:
            values["released"] = True
        return documents.dump_document(values)

    def decode(self, data: bytes, where: str) -> T:
        """Parse the document.

        Raises:
            MalformedRecordError, UnsupportedVersionError.
        """
        doc = documents.load_document(data, where, self.version)
        values = {name: _read(kind, doc, name, where) for name, kind in self.fields.items()}
        released = doc.get("released", False)
        if not isinstance(released, bool):
            raise MalformedRecordError(f"{where}: 'released' must be true or false")
        return self.document(**values, released=released)


ROLE_LEASE = HolderCodec(
    LeaseDocument, 1, {"holder": "holder", "term": "term", "expires_at": "time"}
)
NODE_LEASE = HolderCodec(
    NodeLeaseDocument,
    1,
    {
        "node": "node",
        "incarnation": "incarnation",
        "renewed_at": "time",
        "expires_at": "time",
        "assignment": "version",
    },
)
OWNER_RECORD = HolderCodec(
    OwnerDocument,
    1,
    {"node": "node", "incarnation": "incarnation", "term": "term", "updated_at": "time"},
)

encode_lease = ROLE_LEASE.encode
decode_lease = ROLE_LEASE.decode
encode_node_lease = NODE_LEASE.encode
decode_node_lease = NODE_LEASE.decode
encode_owner = OWNER_RECORD.encode
decode_owner = OWNER_RECORD.decode
