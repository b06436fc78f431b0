"""Codecs of partition commands, snapshots, controller entries, controller
snapshots and leases."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError, RecordError, UnsupportedVersionError
from epochgc.leases.role_leases import LeaseDocument, decode_lease, encode_lease
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
from epochgc.watermarks.partition.codec import (
    LostRange,
    PartitionSnapshot,
    RetainedPlaceholder,
    decode_command,
    decode_snapshot,
    encode_command,
    encode_snapshot,
)
from epochgc.watermarks.partition.commands import (
    AdvanceEpoch,
    AdvanceReconciled,
    PlaceholderBatch,
    Placeholders,
    RecordsLost,
    SetAllowedLocalStartOffset,
    SetStartOffset,
    TermStart,
)
from epochgc.watermarks.partition.state import PartitionState

small = st.integers(0, 10**12)
batches = st.builds(
    PlaceholderBatch,
    l0_key=st.text(min_size=1, max_size=40),
    byte_offset=small,
    byte_length=small,
    records=st.integers(1, 10**6),
)
commands = st.one_of(
    st.builds(TermStart, small),
    st.builds(
        Placeholders,
        small,
        st.integers(1, 10**9),
        small,
        st.lists(batches, min_size=1, max_size=4).map(tuple),
    ),
    st.builds(AdvanceEpoch, small, st.integers(1, 10**9), small),
    st.builds(
        AdvanceReconciled,
        small,
        st.integers(1, 10**9),
        st.integers(-1, 10**9),
        st.integers(-1, 10**9),
    ),
    st.builds(SetAllowedLocalStartOffset, small, st.integers(1, 10**9), st.none() | small),
    st.builds(SetStartOffset, small, st.integers(1, 10**9), small),
    st.builds(
        RecordsLost,
        small,
        small,
        small,
        st.integers(-1, 10**9),
        st.text(max_size=20),
        st.text(max_size=20),
        st.datetimes(
            min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
        ).map(lambda t: t.replace(microsecond=0)),
    ),
)


@given(commands)
def test_commands_round_trip(command) -> None:  # type: ignore[no-untyped-def]
    data = encode_command(command)
    assert decode_command(data) == command
    assert encode_command(decode_command(data)) == data, "encoding is canonical"


def test_unknown_fields_are_ignored_and_newer_versions_refused() -> None:
    doc = json.loads(encode_command(AdvanceEpoch(2, 3, 40)))
    doc["future_field"] = {"x": 1}
    assert decode_command(json.dumps(doc).encode()) == AdvanceEpoch(2, 3, 40)
    doc["v"] = 2
    with pytest.raises(UnsupportedVersionError, match="v=2"):
        decode_command(json.dumps(doc).encode())


PLACEHOLDERS = (
    b'{"v": 1, "type": "placeholders", "term": 1, "seq": 1, "epoch": %d, '
    b'"batches": [{"key": "k", "offset": 0, "length": 1, "records": %d}]}'
)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xfe",
        b"[]",
        b'{"type": "term_start", "term": 1}',
        b'{"v": "1", "type": "term_start", "term": 1}',
        b'{"v": 1, "type": "term_start", "term": true}',
        b'{"v": 1, "type": "fly", "term": 1, "seq": 1}',
        b'{"v": 1, "type": "placeholders", "term": 1, "seq": 1, "epoch": 3, "batches": []}',
        PLACEHOLDERS % (-3, 1),
        PLACEHOLDERS % (3, 0),
        b'{"v": 1, "type": "advance_epoch", "term": 1, "epoch": 3}',
    ],
)
def test_malformed_commands_are_refused(data: bytes) -> None:
    with pytest.raises(MalformedRecordError):
        decode_command(data)


@given(st.binary(max_size=200))
def test_command_decoder_never_crashes_on_garbage(data: bytes) -> None:
    with contextlib.suppress(RecordError):
        decode_command(data)


def test_records_lost_is_an_entry_old_readers_refuse_and_snapshots_keep() -> None:
    """The loss record has its own type (a reader that does not know it
    refuses the entry instead of guessing), and the lost ranges outlive the
    truncated entry in the snapshot, as an optional field."""
    lost = RecordsLost(3, 10, 12, 7, "object deleted", "ops@host", TS)
    doc = json.loads(encode_command(lost))
    assert doc["type"] == "records_lost" and "seq" not in doc
    doc["type"] = "records_lost_v2"
    with pytest.raises(MalformedRecordError, match="unknown command type"):
        decode_command(json.dumps(doc).encode())
    state = PartitionState.new(7)
    plain = PartitionSnapshot(state)
    assert "lost" not in json.loads(encode_snapshot(plain)), "no field without a loss"
    snap = PartitionSnapshot(state, (), (LostRange(10, 12, TS, "ops@host", "object deleted"),))
    assert decode_snapshot(encode_snapshot(snap)) == snap
    bad = json.loads(encode_snapshot(snap))
    bad["lost"][0]["last"] = 9
    with pytest.raises(MalformedRecordError, match="empty"):
        decode_snapshot(json.dumps(bad).encode())


def test_snapshot_round_trip_and_consistency_checks() -> None:
    state = PartitionState.new(7)
    snap = PartitionSnapshot(state, (RetainedPlaceholder(3, 0, 9, 512, 7),))
    assert decode_snapshot(encode_snapshot(snap)) == snap
    legacy = json.loads(encode_snapshot(snap))
    legacy["retained"] = [[3, 0, 9]]
    assert decode_snapshot(json.dumps(legacy).encode()).retained == (RetainedPlaceholder(3, 0, 9),)
    doc = json.loads(encode_snapshot(snap))
    doc["state"]["previous_applied_epoch"] = 99
    with pytest.raises(MalformedRecordError, match="inconsistent"):
        decode_snapshot(json.dumps(doc).encode())
    doc = json.loads(encode_snapshot(snap))
    doc["v"] = 9
    with pytest.raises(UnsupportedVersionError):
        decode_snapshot(json.dumps(doc).encode())
    doc = json.loads(encode_snapshot(snap))
    del doc["state"]["lro"]
    with pytest.raises(MalformedRecordError, match="lro"):
        decode_snapshot(json.dumps(doc).encode())


CREATE = (
    b'{"v": 1, "type": "create_topic", "topic": "%s", "partitions": %d, '
    b'"ts": "2026-11-22T03:00:00Z"}'
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


def test_lease_documents_round_trip() -> None:
    doc = LeaseDocument("node-1/abc", 4, datetime(2026, 11, 22, 3, 0, 5, 123000, tzinfo=UTC))
    data = encode_lease(doc)
    assert b'"expires_at":"2026-11-22T03:00:05.123Z"' in data
    assert decode_lease(data, "lease") == doc
    with pytest.raises(MalformedRecordError):
        decode_lease(
            b'{"v": 1, "holder": "x", "term": 0, "expires_at": "2026-11-22T03:00:05Z"}', "lease"
        )
