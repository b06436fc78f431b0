"""Partition commands and snapshots: round trips, canonical bytes, forward
compatibility, and every malformed document refused."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError, RecordError, UnsupportedVersionError
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


TS = datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC)
