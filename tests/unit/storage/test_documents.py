"""The one time format of every document: ``format_time`` and ``parse_time``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError
from epochgc.storage.documents import (
    TimePrecision,
    format_time,
    get_list,
    load_json_object,
    parse_time,
)

MOMENT = datetime(2026, 11, 22, 3, 0, 5, 123456, tzinfo=UTC)

aware_times = st.datetimes(
    min_value=datetime(1000, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
    ),
)
"""Aware times whose UTC instant has a four-digit year, as RFC 3339 wants."""


def test_seconds_by_default_and_milliseconds_on_request() -> None:
    assert format_time(MOMENT) == "2026-11-22T03:00:05Z"
    assert format_time(MOMENT, precision="seconds") == "2026-11-22T03:00:05Z"
    assert format_time(MOMENT, precision="milliseconds") == "2026-11-22T03:00:05.123Z"
    # Whole seconds still carry their milliseconds (the lease documents'
    # bytes, docs/contract.md, "Leases").
    whole = MOMENT.replace(microsecond=0)
    assert format_time(whole, precision="milliseconds") == "2026-11-22T03:00:05.000Z"


def test_written_in_utc_whatever_the_offset_given() -> None:
    tokyo = MOMENT.astimezone(timezone(timedelta(hours=9)))
    assert format_time(tokyo) == "2026-11-22T03:00:05Z"
    assert format_time(tokyo, precision="milliseconds") == "2026-11-22T03:00:05.123Z"


def test_a_naive_time_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        format_time(datetime(2026, 11, 22, 3, 0, 5))
    with pytest.raises(ValueError, match="timezone-aware"):
        format_time(datetime(2026, 11, 22, 3, 0, 5), precision="milliseconds")


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-22T03:00:05Z",
        "2026-11-22T03:00:05z",
        "2026-11-22T03:00:05+00:00",
        "2026-11-22T05:00:05+02:00",
        "2026-11-21T22:00:05-05:00",
    ],
)
def test_z_and_any_offset_read_as_the_same_utc_instant(text: str) -> None:
    moment = parse_time(text, "doc")
    assert moment == datetime(2026, 11, 22, 3, 0, 5, tzinfo=UTC)
    assert moment.tzinfo is UTC


def test_milliseconds_are_read_back() -> None:
    assert parse_time("2026-11-22T03:00:05.123Z", "doc") == MOMENT.replace(microsecond=123000)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("2026-11-22T03:00:05", "time without a UTC offset"),
        ("yesterday", "not an RFC 3339 time"),
        ("", "not an RFC 3339 time"),
    ],
)
def test_unreadable_times_are_malformed_and_name_the_document(text: str, why: str) -> None:
    with pytest.raises(MalformedRecordError, match=f"^doc: {why}: "):
        parse_time(text, "doc")


@given(moment=aware_times, precision=st.sampled_from(["seconds", "milliseconds"]))
def test_round_trip_keeps_the_instant_to_the_precision(
    moment: datetime, precision: TimePrecision
) -> None:
    text = format_time(moment, precision=precision)
    assert text.endswith("Z")
    back = parse_time(text, "doc")
    truncated = moment.astimezone(UTC).replace(
        microsecond=0 if precision == "seconds" else moment.microsecond // 1000 * 1000
    )
    assert back == truncated
    # Formatting what was read gives the same bytes again.
    assert format_time(back, precision=precision) == text


@given(moment=aware_times)
def test_bytes_are_those_of_the_encoders_it_replaced(moment: datetime) -> None:
    """The two encoders this one replaced (documents: strftime to the
    second; holder documents: isoformat to the millisecond): the bucket's
    bytes do not change."""
    utc = moment.astimezone(UTC)
    assert format_time(moment) == utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert format_time(moment, precision="milliseconds") == utc.isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")


def test_a_list_field_is_checked_and_absent_reads_empty_only_when_allowed() -> None:
    doc = {"items": [{"a": 1}], "empty": [], "scalar": 3}
    assert get_list(doc, "items", "d", objects=True) == [{"a": 1}]
    assert get_list(doc, "missing", "d", absent_ok=True) == []
    with pytest.raises(MalformedRecordError, match=r"^d: field 'missing' must be a list"):
        get_list(doc, "missing", "d")
    with pytest.raises(MalformedRecordError, match="must be a list, got 3"):
        get_list(doc, "scalar", "d")
    with pytest.raises(MalformedRecordError, match="must be a non-empty list"):
        get_list(doc, "empty", "d", non_empty=True)
    with pytest.raises(MalformedRecordError, match="'mixed' must be an object, got 2"):
        get_list({"mixed": [{}, 2]}, "mixed", "d", objects=True)


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"\xff", "not UTF-8 JSON"), (b"{", "not UTF-8 JSON"), (b"[1]", "got list")],
)
def test_only_a_json_object_loads(data: bytes, why: str) -> None:
    assert load_json_object(b'{"x": 1}', "d") == {"x": 1}
    with pytest.raises(MalformedRecordError, match=f"^d: .*{why}"):
        load_json_object(data, "d")
