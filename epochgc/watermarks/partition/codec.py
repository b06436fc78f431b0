"""JSON codecs for the partition log and partition snapshots. Pure.

A placeholder misread is data lost, so nothing is guessed: a document that
does not fit is ``MalformedRecordError`` (``storage.documents``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from epochgc.errors import MalformedRecordError
from epochgc.storage import documents
from epochgc.watermarks.partition.commands import (
    AdvanceEpoch,
    AdvanceReconciled,
    Command,
    PlaceholderBatch,
    Placeholders,
    RecordsLost,
    SetAllowedLocalStartOffset,
    SetStartOffset,
    TermStart,
)
from epochgc.watermarks.partition.state import PartitionState

COMMAND_VERSION = 1


SNAPSHOT_VERSION = 1


def encode_command(command: Command) -> bytes:
    """The log entry bytes of ``command``."""
    doc: dict[str, Any] = {"v": COMMAND_VERSION, "term": command.term}
    if isinstance(command, TermStart | RecordsLost) and command.nonce:
        doc["nonce"] = command.nonce
    if isinstance(command, TermStart):
        doc.update(type="term_start")
        return documents.dump_document(doc)
    if isinstance(command, RecordsLost):
        doc.update(
            type="records_lost",
            first=command.first,
            last=command.last,
            log_offset=command.log_offset,
            reason=command.reason,
            by=command.by,
            ts=documents.format_time(command.ts),
        )
        return documents.dump_document(doc)
    doc["seq"] = command.seq
    if isinstance(command, Placeholders):
        doc.update(
            type="placeholders",
            epoch=command.epoch,
            batches=[
                {
                    "key": b.l0_key,
                    "offset": b.byte_offset,
                    "length": b.byte_length,
                    "records": b.records,
                }
                for b in command.batches
            ],
        )
    elif isinstance(command, AdvanceEpoch):
        doc.update(type="advance_epoch", epoch=command.epoch)
    elif isinstance(command, AdvanceReconciled):
        doc.update(
            type="advance_reconciled",
            lro=command.lro,
            log_offset=command.log_offset,
        )
    elif isinstance(command, SetAllowedLocalStartOffset):
        doc.update(type="set_allowed_local_start_offset", offset=command.offset)
    else:
        doc.update(type="set_start_offset", offset=command.offset)
    return documents.dump_document(doc)


_COMMAND_TYPES = frozenset(
    {
        "term_start",
        "records_lost",
        "placeholders",
        "advance_epoch",
        "advance_reconciled",
        "set_allowed_local_start_offset",
        "set_start_offset",
    }
)


def decode_command(data: bytes, where: str = "partition log entry") -> Command:
    """Parse a log entry.

    Raises:
        MalformedRecordError, UnsupportedVersionError: see ``load_document``;
            also an unknown ``type``.
    """
    doc = documents.load_document(data, where, COMMAND_VERSION)
    kind = doc.get("type")
    if not isinstance(kind, str) or kind not in _COMMAND_TYPES:
        raise MalformedRecordError(f"{where}: unknown command type {kind!r}")
    term = documents.get_int(doc, "term", where, 0)
    nonce = documents.get_optional_str(doc, "nonce", where)
    if kind == "term_start":
        return TermStart(term, nonce)
    if kind == "records_lost":
        return RecordsLost(
            term,
            first=documents.get_int(doc, "first", where, 0),
            last=documents.get_int(doc, "last", where, 0),
            log_offset=documents.get_int(doc, "log_offset", where, -1),
            reason=documents.get_str(doc, "reason", where),
            by=documents.get_str(doc, "by", where),
            ts=documents.parse_time(documents.get_str(doc, "ts", where), where),
            nonce=nonce,
        )
    seq = documents.get_int(doc, "seq", where, 1)
    try:
        if kind == "placeholders":
            epoch = documents.get_int(doc, "epoch", where, 0)
            return Placeholders(term, seq, epoch, _decode_batches(doc, where))
        if kind == "advance_epoch":
            return AdvanceEpoch(term, seq, documents.get_int(doc, "epoch", where, 0))
        if kind == "advance_reconciled":
            lro = documents.get_int(doc, "lro", where, -1)
            return AdvanceReconciled(
                term, seq, lro, documents.get_int(doc, "log_offset", where, -1)
            )
        if kind == "set_allowed_local_start_offset":
            hint = documents.get_optional_int(doc, "offset", where, 0)
            return SetAllowedLocalStartOffset(term, seq, hint)
        if kind == "set_start_offset":
            return SetStartOffset(term, seq, documents.get_int(doc, "offset", where, 0))
    except ValueError as err:
        raise MalformedRecordError(f"{where}: {err}") from err
    raise MalformedRecordError(f"{where}: unknown command type {kind!r}")


def _decode_batches(doc: Mapping[str, Any], where: str) -> tuple[PlaceholderBatch, ...]:
    batches = []
    for item in documents.get_list(doc, "batches", where, non_empty=True, objects=True):
        batches.append(
            PlaceholderBatch(
                l0_key=documents.get_str(item, "key", where),
                byte_offset=documents.get_int(item, "offset", where, 0),
                byte_length=documents.get_int(item, "length", where, 0),
                records=documents.get_int(item, "records", where, 1),
            )
        )
    return tuple(batches)


@dataclass(frozen=True)
class RetainedPlaceholder:
    """Where an accepted placeholder sits, kept so truncation can find the
    log offset below which every placeholder is disposable, and so the
    retention hint can weigh records by size and age (its epoch)."""

    log_offset: int
    first_record: int
    last_record: int
    byte_length: int = 0
    epoch: int = 0


@dataclass(frozen=True)
class LostRange:
    """Records ``first..last`` recorded as lost by a ``records_lost`` entry,
    kept (in the snapshot, after the entry itself is truncated) so readers
    of those offsets are told when, by whom and why."""

    first: int
    last: int
    ts: datetime
    by: str
    reason: str


@dataclass(frozen=True)
class PartitionSnapshot:
    """The state plus the index of placeholders still in the log and the
    ranges of records recorded as lost."""

    state: PartitionState
    retained: tuple[RetainedPlaceholder, ...] = ()
    lost: tuple[LostRange, ...] = ()


_STATE_FIELDS = (
    "revision",
    "max_applied_epoch",
    "previous_applied_epoch",
    "window_offset",
    "min_epoch_lower_bound",
    "lro",
    "reconciled_log_offset",
    "start_offset",
    "next_offset",
    "term",
    "last_seq",
    "applied_log_offset",
)


def encode_snapshot(snapshot: PartitionSnapshot) -> bytes:
    """Snapshot bytes (the seen window is volatile and not part of it)."""
    state = snapshot.state
    fields: dict[str, Any] = {name: getattr(state, name) for name in _STATE_FIELDS}
    fields["allowed_local_start_offset"] = state.allowed_local_start_offset
    doc: dict[str, Any] = {
        "v": SNAPSHOT_VERSION,
        "state": fields,
        "retained": [
            [r.log_offset, r.first_record, r.last_record, r.byte_length, r.epoch]
            for r in snapshot.retained
        ],
    }
    if snapshot.lost:
        # Optional, and only when there is a loss: snapshots of partitions
        # that never lost anything keep their bytes.
        doc["lost"] = [
            {
                "first": r.first,
                "last": r.last,
                "ts": documents.format_time(r.ts),
                "by": r.by,
                "reason": r.reason,
            }
            for r in snapshot.lost
        ]
    return documents.dump_document(doc)


def decode_snapshot(data: bytes, where: str = "partition snapshot") -> PartitionSnapshot:
    """Parse a snapshot.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = documents.load_document(data, where, SNAPSHOT_VERSION)
    raw_state = doc.get("state")
    if not isinstance(raw_state, dict):
        raise MalformedRecordError(f"{where}: 'state' must be an object")
    values: dict[str, Any] = {
        name: documents.get_int(raw_state, name, where, -1) for name in _STATE_FIELDS
    }
    values["allowed_local_start_offset"] = documents.get_optional_int(
        raw_state, "allowed_local_start_offset", where, 0
    )
    state = PartitionState(**values)
    _check_state(state, where)
    retained = []
    for item in documents.get_list(doc, "retained", where, absent_ok=True):
        if (
            not isinstance(item, list)
            or len(item) not in (3, 5)
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in item)
        ):
            raise MalformedRecordError(f"{where}: bad retained entry {item!r}")
        retained.append(RetainedPlaceholder(*item))
    return PartitionSnapshot(state, tuple(retained), _decode_lost(doc, where))


def _decode_lost(doc: Mapping[str, Any], where: str) -> tuple[LostRange, ...]:
    """The optional ``lost`` list (absent in snapshots written before it)."""
    lost = []
    for item in documents.get_list(doc, "lost", where, absent_ok=True, objects=True):
        first, last = (
            documents.get_int(item, "first", where, 0),
            documents.get_int(item, "last", where, 0),
        )
        if last < first:
            raise MalformedRecordError(f"{where}: lost range {first}..{last} is empty")
        lost.append(
            LostRange(
                first,
                last,
                documents.parse_time(documents.get_str(item, "ts", where), where),
                documents.get_str(item, "by", where),
                documents.get_str(item, "reason", where),
            )
        )
    return tuple(lost)


def _check_state(state: PartitionState, where: str) -> None:
    """Reject a snapshot whose fields contradict the state machine's invariants."""
    problems = []
    if not state.revision <= state.min_epoch_lower_bound <= state.previous_applied_epoch:
        problems.append("need revision <= min_epoch_lower_bound <= previous_applied_epoch")
    if state.previous_applied_epoch > state.max_applied_epoch:
        problems.append("previous_applied_epoch > max_applied_epoch")
    if state.lro >= state.next_offset:
        problems.append("lro >= next_offset")
    if state.start_offset > state.next_offset:
        problems.append("start_offset > next_offset")
    if problems:
        raise MalformedRecordError(f"{where}: inconsistent state: {'; '.join(problems)}")
