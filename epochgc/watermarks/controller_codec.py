"""JSON codecs for the controller log and the controller snapshot. Pure.

Both shapes are part of the public contract (docs/contract.md, "Controller
log entries" and "Controller snapshot"); a controller entry misread is a
wrong ``M``, so nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from epochgc.errors import MalformedRecordError
from epochgc.storage import documents
from epochgc.storage.keys import is_valid_topic

CONTROLLER_VERSION = 2


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
    doc: dict[str, Any] = {"v": 1, "ts": documents.format_time(entry.ts)}
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
    return documents.dump_document(doc)


def decode_controller_entry(data: bytes, where: str = "controller entry") -> ControllerEntry:
    """Parse a controller-log entry.

    Raises:
        MalformedRecordError: does not parse, unknown ``type``, invalid topic.
        UnsupportedVersionError: newer ``v``.
    """
    doc = documents.load_document(data, where, CONTROLLER_VERSION)
    kind = doc.get("type")
    ts = documents.parse_time(documents.get_str(doc, "ts", where), where)
    nonce = documents.get_optional_str(doc, "nonce", where)
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
        topic = documents.get_str(doc, "topic", where)
        if not is_valid_topic(topic):
            raise MalformedRecordError(f"{where}: invalid topic name {topic!r}")
        if kind == "delete_topic":
            revision = documents.get_optional_int(doc, "revision", where, 1)
            return DeleteTopic(topic, ts, revision, nonce)
        partitions = documents.get_int(doc, "partitions", where, 1)
        config = doc.get("config", {})
        if not isinstance(config, dict):
            raise MalformedRecordError(f"{where}: 'config' must be an object")
        return CreateTopic(topic, partitions, config, ts, nonce)
    raise MalformedRecordError(f"{where}: unknown controller entry type {kind!r}")


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
    return documents.dump_document(
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
            "epoch_starts": [
                [epoch, documents.format_time(ts)] for epoch, ts in snapshot.epoch_starts
            ],
            "older_epochs_started_by": None if older is None else documents.format_time(older),
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
    doc = documents.load_document(data, where, CONTROLLER_SNAPSHOT_VERSION)
    offset = documents.get_int(doc, "offset", where, 0)
    topics = tuple(
        _decode_live_topic(item, offset, where) for item in documents.get_list(doc, "topics", where)
    )
    names = [t.name for t in topics]
    if len(set(names)) != len(names):
        raise MalformedRecordError(f"{where}: a topic name is live twice")
    deleted = tuple(
        _decode_deleted_topic(item, offset, where)
        for item in documents.get_list(doc, "deleted_topics", where)
    )
    incarnations = [(d.name, d.revision) for d in deleted] + [(t.name, t.revision) for t in topics]
    if len(set(incarnations)) != len(incarnations):
        raise MalformedRecordError(f"{where}: a topic incarnation is listed twice")
    starts = []
    previous = 0
    for item in documents.get_list(doc, "epoch_starts", where):
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
        starts.append((epoch, documents.parse_time(item[1], where)))
        previous = epoch
    older_text = doc.get("older_epochs_started_by")
    if older_text is not None and not isinstance(older_text, str):
        raise MalformedRecordError(f"{where}: 'older_epochs_started_by' must be a time or null")
    older = None if older_text is None else documents.parse_time(older_text, where)
    return ControllerSnapshot(offset, topics, deleted, tuple(starts), older)


def _get_topic_name(item: Mapping[str, Any], what: str) -> str:
    name = documents.get_str(item, "topic", what)
    if not is_valid_topic(name):
        raise MalformedRecordError(f"{what}: invalid topic name {name!r}")
    return name


def _decode_live_topic(item: object, offset: int, where: str) -> SnapshotTopic:
    if not isinstance(item, dict):
        raise MalformedRecordError(f"{where}: each topic must be an object")
    name = _get_topic_name(item, where)
    revision = documents.get_int(item, "revision", where, 1)
    if revision > offset:
        raise MalformedRecordError(f"{where}: topic {name!r} revision {revision} > offset {offset}")
    config = item.get("config", {})
    if not isinstance(config, dict):
        raise MalformedRecordError(f"{where}: topic {name!r} 'config' must be an object")
    return SnapshotTopic(name, revision, documents.get_int(item, "partitions", where, 1), config)


def _decode_deleted_topic(item: object, offset: int, where: str) -> DeletedTopic:
    if not isinstance(item, dict):
        raise MalformedRecordError(f"{where}: each deleted topic must be an object")
    name = _get_topic_name(item, where)
    revision = documents.get_int(item, "revision", where, 1)
    deleted_at = documents.get_int(item, "deleted_at", where, 1)
    if not revision < deleted_at <= offset:
        raise MalformedRecordError(
            f"{where}: deleted topic {name!r} needs revision < deleted_at <= offset, got "
            f"{revision}, {deleted_at}, {offset}"
        )
    return DeletedTopic(name, revision, deleted_at)
