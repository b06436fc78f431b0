"""Controller log entries and controller snapshots: the contract's
examples, round trips in canonical order, and malformed documents refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.watermarks.controller_codec import (
    ControllerSnapshot,
    CreateTopic,
    DeletedTopic,
    DeleteTopic,
    EpochTick,
    SnapshotTopic,
    decode_controller_entry,
    decode_controller_snapshot,
    encode_controller_entry,
    encode_controller_snapshot,
)

CREATE = (
    b'{"v": 1, "type": "create_topic", "topic": "%s", "partitions": %d, '
    b'"ts": "2026-11-22T03:00:00Z"}'
)
TS = datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC)


def test_controller_entries_match_the_public_contract() -> None:
    """The exact examples of docs/contract.md ("Controller log entries")
    parse, and ours encode to the same fields."""
    create = (
        b'{"v": 1, "type": "create_topic", "topic": "orders", "partitions": 4, '
        b'"config": {"retention.local.target.bytes": null, "retention.local.target.ms": null}, '
        b'"ts": "2026-11-22T03:00:00Z"}'
    )
    parsed = decode_controller_entry(create)
    assert parsed == CreateTopic(
        "orders",
        4,
        {"retention.local.target.bytes": None, "retention.local.target.ms": None},
        TS,
    )
    assert json.loads(encode_controller_entry(parsed)) == json.loads(create)
    delete = b'{"v": 1, "type": "delete_topic", "topic": "orders", "ts": "2026-11-22T03:00:00Z"}'
    assert decode_controller_entry(delete) == DeleteTopic("orders", TS)
    tick = b'{"v": 1, "type": "epoch_tick", "ts": "2026-11-22T03:00:00Z"}'
    assert decode_controller_entry(tick) == EpochTick(TS)
    assert json.loads(encode_controller_entry(EpochTick(TS))) == json.loads(tick)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b'{"v": 3, "type": "epoch_tick", "ts": "2026-11-22T03:00:00Z"}', UnsupportedVersionError),
        (b'{"v": 1, "type": "rename_topic", "ts": "2026-11-22T03:00:00Z"}', MalformedRecordError),
        (b'{"v": 1, "type": "epoch_tick", "ts": "yesterday"}', MalformedRecordError),
        (b'{"v": 1, "type": "epoch_tick", "ts": "2026-11-22T03:00:00"}', MalformedRecordError),
        (CREATE % (b"a/b", 1), MalformedRecordError),
        (CREATE % (b"a", 0), MalformedRecordError),
        (b"not json", MalformedRecordError),
        # Only a delete naming its revision is v2 (a v1 reader ignores it).
        (b'{"v": 2, "type": "epoch_tick", "ts": "2026-11-22T03:00:00Z"}', MalformedRecordError),
        (
            b'{"v": 1, "type": "delete_topic", "topic": "a", "revision": 3, '
            b'"ts": "2026-11-22T03:00:00Z"}',
            MalformedRecordError,
        ),
        (
            b'{"v": 2, "type": "delete_topic", "topic": "a", "ts": "2026-11-22T03:00:00Z"}',
            MalformedRecordError,
        ),
        (
            b'{"v": 1, "type": "epoch_tick", "ts": "2026-11-22T03:00:00Z", "nonce": 7}',
            MalformedRecordError,
        ),
    ],
)
def test_bad_controller_entries_are_refused(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_controller_entry(data)


CONTROLLER_SNAPSHOT = ControllerSnapshot(
    offset=12,
    topics=(
        SnapshotTopic("orders", 9, 4, {"retention.local.target.ms": 60000}),
        SnapshotTopic("audit", 2, 1, {}),
    ),
    deleted_topics=(DeletedTopic("orders", 3, 7),),
    epoch_starts=((11, TS), (12, TS.replace(minute=1))),
    older_epochs_started_by=TS.replace(hour=2),
)


def test_controller_snapshot_round_trips_in_canonical_order() -> None:
    data = encode_controller_snapshot(CONTROLLER_SNAPSHOT)
    doc = json.loads(data)
    assert doc["v"] == 1 and doc["offset"] == 12
    assert [t["topic"] for t in doc["topics"]] == ["audit", "orders"], "sorted by name"
    assert doc["deleted_topics"] == [{"topic": "orders", "revision": 3, "deleted_at": 7}]
    assert doc["epoch_starts"] == [[11, "2026-11-22T03:00:00Z"], [12, "2026-11-22T03:01:00Z"]]
    decoded = decode_controller_snapshot(data)
    assert decoded.offset == 12
    assert sorted(decoded.topics, key=lambda t: t.name) == sorted(
        CONTROLLER_SNAPSHOT.topics, key=lambda t: t.name
    )
    assert decoded.deleted_topics == CONTROLLER_SNAPSHOT.deleted_topics
    assert decoded.epoch_starts == CONTROLLER_SNAPSHOT.epoch_starts
    assert decoded.older_epochs_started_by == CONTROLLER_SNAPSHOT.older_epochs_started_by
    assert encode_controller_snapshot(decoded) == data, "deterministic bytes"


def test_controller_snapshot_ignores_unknown_fields_and_refuses_newer_versions() -> None:
    doc = json.loads(encode_controller_snapshot(CONTROLLER_SNAPSHOT))
    doc["future"] = {"x": 1}
    doc["topics"][0]["owner"] = "someone"
    assert decode_controller_snapshot(json.dumps(doc).encode()).offset == 12
    doc["v"] = 2
    with pytest.raises(UnsupportedVersionError):
        decode_controller_snapshot(json.dumps(doc).encode())


def _snapshot_with(**changes: object) -> bytes:
    doc = json.loads(encode_controller_snapshot(CONTROLLER_SNAPSHOT))
    for path, value in changes.items():
        target = doc
        *parents, leaf = path.split("__")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if value is None:
            del target[int(leaf) if leaf.isdigit() else leaf]
        else:
            target[int(leaf) if leaf.isdigit() else leaf] = value
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        _snapshot_with(offset=None),
        _snapshot_with(offset=-1),
        _snapshot_with(topics=None),
        _snapshot_with(topics={"orders": 1}),
        _snapshot_with(topics__0__topic="a/b"),
        _snapshot_with(topics__0__revision=13),  # created after the snapshot's offset
        _snapshot_with(topics__0__partitions=0),
        _snapshot_with(topics__0__config=[]),
        _snapshot_with(topics__1__topic="audit"),  # one name live twice
        _snapshot_with(deleted_topics=None),
        _snapshot_with(deleted_topics__0__deleted_at=3),  # deleted before created
        _snapshot_with(deleted_topics__0__deleted_at=13),  # after the snapshot's offset
        _snapshot_with(deleted_topics__0__revision=9),  # the live incarnation, deleted
        _snapshot_with(epoch_starts=None),
        _snapshot_with(epoch_starts=[[12, "2026-11-22T03:00:00Z"], [11, "2026-11-22T03:00:00Z"]]),
        _snapshot_with(epoch_starts=[[13, "2026-11-22T03:00:00Z"]]),
        _snapshot_with(epoch_starts=[[0, "2026-11-22T03:00:00Z"]]),
        _snapshot_with(epoch_starts=[[True, "2026-11-22T03:00:00Z"]]),
        _snapshot_with(epoch_starts=[[11, "yesterday"]]),
        _snapshot_with(epoch_starts=[[11]]),
        _snapshot_with(older_epochs_started_by=5),
        _snapshot_with(older_epochs_started_by="2026-11-22T03:00:00"),
    ],
)
def test_malformed_controller_snapshots_are_refused(data: bytes) -> None:
    with pytest.raises(MalformedRecordError):
        decode_controller_snapshot(data)
