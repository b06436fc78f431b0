"""Helpers for the JSON documents epochgc keeps in the bucket: versioned
parsing, deterministic bytes, typed field readers and the one time format.
Pure.

Every document is a UTF-8 JSON object with a version ``v``. Unknown fields
are ignored (forward compatibility); a ``v`` newer than the reader knows is
refused with ``UnsupportedVersionError``; anything else that does not fit is
``MalformedRecordError``. Nothing is ever guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from epochgc.errors import MalformedRecordError, UnsupportedVersionError


def load_json_object(data: bytes, what: str) -> dict[str, Any]:
    """Parse a UTF-8 JSON object, with no version (also for documents others
    write, such as S3 Inventory manifests).

    Raises:
        MalformedRecordError: not UTF-8 JSON, or not an object.
    """
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MalformedRecordError(f"{what}: not UTF-8 JSON: {err}") from err
    if not isinstance(doc, dict):
        raise MalformedRecordError(f"{what}: expected a JSON object, got {type(doc).__name__}")
    return doc


def load_document(data: bytes, what: str, known_version: int) -> dict[str, Any]:
    """Parse a versioned JSON object.

    Raises:
        MalformedRecordError: not UTF-8 JSON, not an object, or no integer ``v``.
        UnsupportedVersionError: ``v`` above ``known_version``.
    """
    doc = load_json_object(data, what)
    version = doc.get("v")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise MalformedRecordError(f"{what}: missing or invalid version v={version!r}")
    if version > known_version:
        raise UnsupportedVersionError(
            f"{what}: version v={version} is newer than this reader (knows v<={known_version})"
        )
    return doc


def dump_document(doc: Mapping[str, Any]) -> bytes:
    """Serialise deterministically (sorted keys, no spaces): identical
    documents give identical bytes, which create-only idempotency relies on."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


def get_int(doc: Mapping[str, Any], name: str, what: str, minimum: int | None = None) -> int:
    """A required integer field (booleans are not integers here)."""
    value = doc.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedRecordError(f"{what}: field {name!r} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise MalformedRecordError(f"{what}: field {name!r} must be >= {minimum}, got {value}")
    return value


def get_optional_int(
    doc: Mapping[str, Any], name: str, what: str, minimum: int | None = None
) -> int | None:
    """An integer field that may be ``null``."""
    if doc.get(name) is None:
        return None
    return get_int(doc, name, what, minimum)


def get_str(doc: Mapping[str, Any], name: str, what: str) -> str:
    """A required string field."""
    value = doc.get(name)
    if not isinstance(value, str):
        raise MalformedRecordError(f"{what}: field {name!r} must be a string, got {value!r}")
    return value


def get_optional_str(doc: Mapping[str, Any], name: str, where: str) -> str:
    """A string field that may be absent (read as ``""``)."""
    value = doc.get(name, "")
    if not isinstance(value, str):
        raise MalformedRecordError(f"{where}: field {name!r} must be a string, got {value!r}")
    return value


def get_list(
    doc: Mapping[str, Any],
    name: str,
    what: str,
    *,
    absent_ok: bool = False,
    non_empty: bool = False,
    objects: bool = False,
) -> list[Any]:
    """A list field. With ``absent_ok`` a missing one reads as ``[]`` (a
    field added after the document's first version); with ``objects`` every
    item must be a JSON object."""
    value = doc.get(name)
    if value is None and absent_ok:
        return []
    if not isinstance(value, list) or (non_empty and not value):
        wanted = "a non-empty list" if non_empty else "a list"
        raise MalformedRecordError(f"{what}: field {name!r} must be {wanted}, got {value!r}")
    for item in value if objects else ():
        if not isinstance(item, dict):
            raise MalformedRecordError(
                f"{what}: each entry of {name!r} must be an object, got {item!r}"
            )
    return value


TimePrecision = Literal["seconds", "milliseconds"]
"""How finely ``format_time`` writes: to the second (every document but the
holder documents) or to the millisecond (role leases, node leases and
ownership records; docs/contract.md, "Rules shared by every document")."""


def format_time(moment: datetime, *, precision: TimePrecision = "seconds") -> str:
    """RFC 3339 UTC with a ``Z`` suffix, truncated to ``precision``:
    ``2026-11-22T03:00:05Z`` or ``2026-11-22T03:00:05.123Z``.

    Raises:
        ValueError: a naive ``moment`` (a time without an offset is refused).
    """
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return moment.astimezone(UTC).isoformat(timespec=precision).replace("+00:00", "Z")


def parse_time(text: str, what: str) -> datetime:
    """Parse an RFC 3339 time (any offset; ``Z`` accepted) to aware UTC."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as err:
        raise MalformedRecordError(f"{what}: not an RFC 3339 time: {text!r}") from err
    if moment.tzinfo is None:
        raise MalformedRecordError(f"{what}: time without a UTC offset: {text!r}")
    return moment.astimezone(UTC)
