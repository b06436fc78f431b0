"""JSON codecs for the partition log, partition snapshots, the controller
log and the controller snapshot. Pure.

Every document is a UTF-8 JSON object with a version ``v``. Unknown fields
are ignored (forward compatibility); a ``v`` newer than this reader knows is
refused with ``UnsupportedVersionError``; anything else that does not fit is
``MalformedRecordError``. Nothing is ever guessed: a placeholder misread is
data lost, and a controller entry misread is a wrong ``M``.

The controller-entry and controller-snapshot shapes are part of the public
contract (docs/contract.md, "Controller log entries" and "Controller
snapshot").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.storage.keys import is_valid_topic
from epochgc.watermarks.commands import (
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
from epochgc.watermarks.state import PartitionState

COMMAND_VERSION = 1
SNAPSHOT_VERSION = 1
CONTROLLER_VERSION = 2


# --- shared helpers ----------------------------------------------------------


def load_document(data: bytes, what: str, known_version: int) -> dict[str, Any]:
    """Parse a versioned JSON object.

    Raises:
        MalformedRecordError: not UTF-8 JSON, not an object, or no integer ``v``.
        UnsupportedVersionError: ``v`` above ``known_version``.
    """
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MalformedRecordError(f"{what}: not UTF-8 JSON: {err}") from err
    if not isinstance(doc, dict):
        raise MalformedRecordError(f"{what}: expected a JSON object, got {type(doc).__name__}")
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


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with a ``Z`` suffix, second precision."""
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str, what: str) -> datetime:
    """Parse an RFC 3339 time (any offset; ``Z`` accepted) to aware UTC."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as err:
        raise MalformedRecordError(f"{what}: not an RFC 3339 time: {text!r}") from err
    if moment.tzinfo is None:
        raise MalformedRecordError(f"{what}: time without a UTC offset: {text!r}")
    return moment.astimezone(UTC)


# --- partition log commands ----------------------------------------------------


def encode_command(command: Command) -> bytes:
    """The log entry bytes of ``command``."""
    doc: dict[str, Any] = {"v": COMMAND_VERSION, "term": command.term}
    if isinstance(command, TermStart | RecordsLost) and command.nonce:
        doc["nonce"] = command.nonce
    if isinstance(command, TermStart):
        doc.update(type="term_start")
        return dump_document(doc)
    if isinstance(command, RecordsLost):
        doc.update(
            type="records_lost",
            first=command.first,
            last=command.last,
            log_offset=command.log_offset,
            reason=command.reason,
            by=command.by,
            ts=format_time(command.ts),
        )
        return dump_document(doc)
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
    return dump_document(doc)


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
    doc = load_document(data, where, COMMAND_VERSION)
    kind = doc.get("type")
    if not isinstance(kind, str) or kind not in _COMMAND_TYPES:
        raise MalformedRecordError(f"{where}: unknown command type {kind!r}")
    term = get_int(doc, "term", where, 0)
    nonce = get_optional_str(doc, "nonce", where)
    if kind == "term_start":
        return TermStart(term, nonce)
    if kind == "records_lost":
        return RecordsLost(
            term,
            first=get_int(doc, "first", where, 0),
            last=get_int(doc, "last", where, 0),
            log_offset=get_int(doc, "log_offset", where, -1),
            reason=get_str(doc, "reason", where),
            by=get_str(doc, "by", where),
            ts=parse_time(get_str(doc, "ts", where), where),
            nonce=nonce,
        )
    seq = get_int(doc, "seq", where, 1)
    try:
        if kind == "placeholders":
            epoch = get_int(doc, "epoch", where, 0)
            return Placeholders(term, seq, epoch, _decode_batches(doc, where))
        if kind == "advance_epoch":
            return AdvanceEpoch(term, seq, get_int(doc, "epoch", where, 0))
        if kind == "advance_reconciled":
            lro = get_int(doc, "lro", where, -1)
            return AdvanceReconciled(term, seq, lro, get_int(doc, "log_offset", where, -1))
        if kind == "set_allowed_local_start_offset":
            hint = get_optional_int(doc, "offset", where, 0)
            return SetAllowedLocalStartOffset(term, seq, hint)
        if kind == "set_start_offset":
            return SetStartOffset(term, seq, get_int(doc, "offset", where, 0))
    except ValueError as err:
        raise MalformedRecordError(f"{where}: {err}") from err
    raise MalformedRecordError(f"{where}: unknown command type {kind!r}")


def _decode_batches(doc: Mapping[str, Any], where: str) -> tuple[PlaceholderBatch, ...]:
    raw = doc.get("batches")
    if not isinstance(raw, list) or not raw:
        raise MalformedRecordError(f"{where}: 'batches' must be a non-empty list")
    batches = []
    for item in raw:
        if not isinstance(item, dict):
            raise MalformedRecordError(f"{where}: each batch must be an object")
        batches.append(
            PlaceholderBatch(
                l0_key=get_str(item, "key", where),
                byte_offset=get_int(item, "offset", where, 0),
                byte_length=get_int(item, "length", where, 0),
                records=get_int(item, "records", where, 1),
            )
        )
    return tuple(batches)


# --- partition snapshots -----------------------------------------------------


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
                "ts": format_time(r.ts),
                "by": r.by,
                "reason": r.reason,
            }
            for r in snapshot.lost
        ]
    return dump_document(doc)


def decode_snapshot(data: bytes, where: str = "partition snapshot") -> PartitionSnapshot:
    """Parse a snapshot.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = load_document(data, where, SNAPSHOT_VERSION)
    raw_state = doc.get("state")
    if not isinstance(raw_state, dict):
        raise MalformedRecordError(f"{where}: 'state' must be an object")
    values: dict[str, Any] = {name: get_int(raw_state, name, where, -1) for name in _STATE_FIELDS}
    values["allowed_local_start_offset"] = get_optional_int(
        raw_state, "allowed_local_start_offset", where, 0
    )
    state = PartitionState(**values)
    _check_state(state, where)
    raw_retained = doc.get("retained", [])
    if not isinstance(raw_retained, list):
        raise MalformedRecordError(f"{where}: 'retained' must be a list")
    retained = []
    for item in raw_retained:
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
    raw = doc.get("lost", [])
    if not isinstance(raw, list):
        raise MalformedRecordError(f"{where}: 'lost' must be a list")
    lost = []
    for item in raw:
        if not isinstance(item, dict):
            raise MalformedRecordError(f"{where}: bad lost entry {item!r}")
        first, last = get_int(item, "first", where, 0), get_int(item, "last", where, 0)
        if last < first:
            raise MalformedRecordError(f"{where}: lost range {first}..{last} is empty")
        lost.append(
            LostRange(
                first,
                last,
                parse_time(get_str(item, "ts", where), where),
                get_str(item, "by", where),
                get_str(item, "reason", where),
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


# --- controller log ------------------------------------------------------------


@dataclass(frozen=True)
class CreateTopic:
    """``create_topic``: a topic and its partition count; its revision is
    the offset of this entry.

    ``nonce`` makes every entry's bytes unique (empty in entries written
    before it existed): a writer that finds its own bytes in a slot knows
    the slot is its own, never another writer's identical entry.
    """

    topic: str
    partitions: int
    config: Mapping[str, Any]
    ts: datetime
    nonce: str = ""


@dataclass(frozen=True)
class DeleteTopic:
    """``delete_topic``: incarnation ``topic@revision`` no longer pins ``M``.

    ``revision`` is the incarnation the writer read as live; the fold ends
    it only while it is still live, so a retried or late append never ends
    an incarnation created after the writer's read. ``None`` (entries
    written before revisions were named) ends whichever incarnation is live.
    """

    topic: str
    ts: datetime
    revision: int | None = None
    nonce: str = ""


@dataclass(frozen=True)
class EpochTick:
    """``epoch_tick``: moves the cluster epoch (the log's newest offset)."""

    ts: datetime
    nonce: str = ""


ControllerEntry = CreateTopic | DeleteTopic | EpochTick

NAMED_DELETE_VERSION = 2
"""The ``v`` of a ``delete_topic`` that names its revision. A reader that
knows only v1 would ignore ``revision`` and end whichever incarnation is
live, so it must refuse the entry instead; ticks and creates keep v1, whose
readers ignore the added ``nonce`` harmlessly."""


def encode_controller_entry(entry: ControllerEntry) -> bytes:
    """The controller-log bytes of ``entry`` (docs/contract.md, "Controller log entries")."""
    doc: dict[str, Any] = {"v": 1, "ts": format_time(entry.ts)}
    if entry.nonce:
        doc["nonce"] = entry.nonce
    if isinstance(entry, CreateTopic):
        doc.update(
            type="create_topic",
            topic=entry.topic,
            partitions=entry.partitions,
            config=dict(entry.config),
        )
    elif isinstance(entry, DeleteTopic):
        doc.update(type="delete_topic", topic=entry.topic)
        if entry.revision is not None:
            doc.update(v=NAMED_DELETE_VERSION, revision=entry.revision)
    else:
        doc.update(type="epoch_tick")
    return dump_document(doc)


def decode_controller_entry(data: bytes, where: str = "controller entry") -> ControllerEntry:
    """Parse a controller-log entry.

    Raises:
        MalformedRecordError: does not parse, unknown ``type``, invalid topic.
        UnsupportedVersionError: newer ``v``.
    """
    doc = load_document(data, where, CONTROLLER_VERSION)
    kind = doc.get("type")
    ts = parse_time(get_str(doc, "ts", where), where)
    nonce = get_optional_str(doc, "nonce", where)
    named = kind == "delete_topic" and doc.get("revision") is not None
    if (doc["v"] == NAMED_DELETE_VERSION) != named:
        # A v1 reader ignores ``revision``: only a v2 entry may carry one,
        # and only a delete that names its revision is v2.
        raise MalformedRecordError(
            f"{where}: v={doc['v']} {kind}: only a delete_topic naming its revision is "
            f"v={NAMED_DELETE_VERSION}"
        )
    if kind == "epoch_tick":
        return EpochTick(ts, nonce)
    if kind in ("create_topic", "delete_topic"):
        topic = get_str(doc, "topic", where)
        if not is_valid_topic(topic):
            raise MalformedRecordError(f"{where}: invalid topic name {topic!r}")
        if kind == "delete_topic":
            revision = get_optional_int(doc, "revision", where, 1)
            return DeleteTopic(topic, ts, revision, nonce)
        partitions = get_int(doc, "partitions", where, 1)
        config = doc.get("config", {})
        if not isinstance(config, dict):
            raise MalformedRecordError(f"{where}: 'config' must be an object")
        return CreateTopic(topic, partitions, config, ts, nonce)
    raise MalformedRecordError(f"{where}: unknown controller entry type {kind!r}")


# --- controller snapshot ---------------------------------------------------------

CONTROLLER_SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class SnapshotTopic:
    """A live topic as the controller snapshot records it."""

    name: str
    revision: int
    partitions: int
    config: Mapping[str, Any]


@dataclass(frozen=True)
class DeletedTopic:
    """A deleted topic incarnation, kept so that a janitor can find what
    belonged to it (everything keyed by ``(name, revision)``).

    ``deleted_at`` is the controller offset (the cluster epoch) of its
    ``delete_topic`` entry, not a wall-clock time.
    """

    name: str
    revision: int
    deleted_at: int


@dataclass(frozen=True)
class ControllerSnapshot:
    """The fold of the controller log up to ``offset`` (docs/contract.md,
    "Controller snapshot").

    ``epoch_starts`` holds ``(epoch, started_at)`` for the newest epochs only
    (ascending); every older epoch started at or before
    ``older_epochs_started_by`` (``None``: none was dropped).
    """

    offset: int
    topics: tuple[SnapshotTopic, ...]
    deleted_topics: tuple[DeletedTopic, ...]
    epoch_starts: tuple[tuple[int, datetime], ...]
    older_epochs_started_by: datetime | None = None


def encode_controller_snapshot(snapshot: ControllerSnapshot) -> bytes:
    """The bytes of ``{root}/meta/controller/snapshot`` (a public format,
    docs/contract.md, "Controller snapshot"): topics sorted by name, deleted topics by
    ``(name, revision)``, so one fold always gives the same bytes."""
    older = snapshot.older_epochs_started_by
    return dump_document(
        {
            "v": CONTROLLER_SNAPSHOT_VERSION,
            "offset": snapshot.offset,
            "topics": [
                {
                    "topic": t.name,
                    "revision": t.revision,
                    "partitions": t.partitions,
                    "config": dict(t.config),
                }
                for t in sorted(snapshot.topics, key=lambda t: t.name)
            ],
            "deleted_topics": [
                {"topic": d.name, "revision": d.revision, "deleted_at": d.deleted_at}
                for d in sorted(snapshot.deleted_topics, key=lambda d: (d.name, d.revision))
            ],
            "epoch_starts": [[epoch, format_time(ts)] for epoch, ts in snapshot.epoch_starts],
            "older_epochs_started_by": None if older is None else format_time(older),
        }
    )


def decode_controller_snapshot(
    data: bytes, where: str = "controller snapshot"
) -> ControllerSnapshot:
    """Parse a controller snapshot, checking it against the log's own rules
    (a revision is an offset at or below the snapshot's, a deletion follows
    its creation, one live incarnation per name, epochs ascending).

    Raises:
        MalformedRecordError: does not parse or contradicts those rules.
        UnsupportedVersionError: newer ``v``.
    """
    doc = load_document(data, where, CONTROLLER_SNAPSHOT_VERSION)
    offset = get_int(doc, "offset", where, 0)
    topics = tuple(
        _decode_live_topic(item, offset, where) for item in _get_list(doc, "topics", where)
    )
    names = [t.name for t in topics]
    if len(set(names)) != len(names):
        raise MalformedRecordError(f"{where}: a topic name is live twice")
    deleted = tuple(
        _decode_deleted_topic(item, offset, where)
        for item in _get_list(doc, "deleted_topics", where)
    )
    incarnations = [(d.name, d.revision) for d in deleted] + [(t.name, t.revision) for t in topics]
    if len(set(incarnations)) != len(incarnations):
        raise MalformedRecordError(f"{where}: a topic incarnation is listed twice")
    starts = []
    previous = 0
    for item in _get_list(doc, "epoch_starts", where):
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not isinstance(item[0], int)
            or isinstance(item[0], bool)
            or not isinstance(item[1], str)
        ):
            raise MalformedRecordError(f"{where}: bad epoch_starts entry {item!r}")
        epoch = item[0]
        if not previous < epoch <= offset:
            raise MalformedRecordError(
                f"{where}: epoch_starts must ascend within 1..{offset}, got {epoch} "
                f"after {previous}"
            )
        starts.append((epoch, parse_time(item[1], where)))
        previous = epoch
    older_text = doc.get("older_epochs_started_by")
    if older_text is not None and not isinstance(older_text, str):
        raise MalformedRecordError(f"{where}: 'older_epochs_started_by' must be a time or null")
    older = None if older_text is None else parse_time(older_text, where)
    return ControllerSnapshot(offset, topics, deleted, tuple(starts), older)


def _get_list(doc: Mapping[str, Any], name: str, what: str) -> list[Any]:
    value = doc.get(name)
    if not isinstance(value, list):
        raise MalformedRecordError(f"{what}: field {name!r} must be a list, got {value!r}")
    return value


def _get_topic_name(item: Mapping[str, Any], what: str) -> str:
    name = get_str(item, "topic", what)
    if not is_valid_topic(name):
        raise MalformedRecordError(f"{what}: invalid topic name {name!r}")
    return name


def _decode_live_topic(item: object, offset: int, where: str) -> SnapshotTopic:
    if not isinstance(item, dict):
        raise MalformedRecordError(f"{where}: each topic must be an object")
    name = _get_topic_name(item, where)
    revision = get_int(item, "revision", where, 1)
    if revision > offset:
        raise MalformedRecordError(f"{where}: topic {name!r} revision {revision} > offset {offset}")
    config = item.get("config", {})
    if not isinstance(config, dict):
        raise MalformedRecordError(f"{where}: topic {name!r} 'config' must be an object")
    return SnapshotTopic(name, revision, get_int(item, "partitions", where, 1), config)


def _decode_deleted_topic(item: object, offset: int, where: str) -> DeletedTopic:
    if not isinstance(item, dict):
        raise MalformedRecordError(f"{where}: each deleted topic must be an object")
    name = _get_topic_name(item, where)
    revision = get_int(item, "revision", where, 1)
    deleted_at = get_int(item, "deleted_at", where, 1)
    if not revision < deleted_at <= offset:
        raise MalformedRecordError(
            f"{where}: deleted topic {name!r} needs revision < deleted_at <= offset, got "
            f"{revision}, {deleted_at}, {offset}"
        )
    return DeletedTopic(name, revision, deleted_at)
