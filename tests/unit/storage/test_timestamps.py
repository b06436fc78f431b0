"""``storage.timestamps.parse_timestamp`` gives the instant botocore's
default reader gives, for every timestamp form S3 and S3-compatible stores
send, and botocore's own error for anything else."""

from __future__ import annotations

import email.utils
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from botocore.utils import parse_timestamp as botocore_parse_timestamp
from hypothesis import example, given
from hypothesis import strategies as st

from epochgc.storage.timestamps import _UTC_ISO, parse_timestamp

MOMENTS = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59))
"""Naive UTC wall times over the whole range ``datetime`` has."""


def iso(moment: datetime, digits: int, zone: str) -> str:
    """``moment`` in S3's ISO form: ``digits`` fractional digits (0: none),
    then ``zone`` (``Z`` or ``+00:00``). Years below 1000 zero-padded, as
    ``strftime`` on glibc would not."""
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if digits:
        text += "." + f"{moment.microsecond:06d}"[:digits]
    return text + zone


def truncated(moment: datetime, digits: int) -> datetime:
    """``moment`` as UTC, its microseconds cut to ``digits`` digits."""
    unit = 10 ** (6 - digits)
    return moment.replace(microsecond=moment.microsecond // unit * unit, tzinfo=UTC)


def assert_same_as_botocore(text: str, *, in_utc: bool = True) -> datetime:
    """Our reading of ``text``, checked to be botocore's instant, aware,
    and (``in_utc``) at UTC offset 0."""
    ours = parse_timestamp(text)
    theirs = botocore_parse_timestamp(text)
    assert ours == theirs
    assert ours.tzinfo is not None
    if in_utc:
        assert ours.utcoffset() == timedelta(0)
    return ours


@given(
    MOMENTS,
    st.sampled_from([0, 3, 6, 1, 2, 4, 5]),
    st.sampled_from(["Z", "+00:00"]),
)
@example(datetime(2026, 11, 25, 10, 0, 0, 123000), 3, "Z")
@example(datetime(1, 1, 1), 0, "Z")
@example(datetime(9999, 12, 31, 23, 59, 59, 999999), 6, "+00:00")
@example(datetime(2028, 2, 29, 0, 0, 0, 5), 6, "Z")
def test_iso_utc_forms_read_fast_and_as_botocore_does(
    moment: datetime, digits: int, zone: str
) -> None:
    text = iso(moment, digits, zone)
    ours = assert_same_as_botocore(text)
    assert ours == truncated(moment, digits)
    # The stdlib zone, not dateutil's: the fast path read it.
    assert ours.tzinfo is UTC


@given(st.datetimes(min_value=datetime(1000, 1, 1), timezones=st.just(UTC)))
@example(datetime(2026, 11, 25, 10, 0, tzinfo=UTC))
def test_http_dates_fall_back_to_botocore(moment: datetime) -> None:
    """Last-Modified headers (HeadObject, GetObject). Years from 1000: the
    stdlib writes earlier ones without padding, which dateutil reads as a
    two-digit year (botocore's answer either way: this form falls back)."""
    text = email.utils.format_datetime(moment.replace(microsecond=0), usegmt=True)
    ours = assert_same_as_botocore(text)
    assert ours == moment.replace(microsecond=0)


@given(st.integers(min_value=0, max_value=2**32), st.sampled_from(["", ".5", ".123"]))
def test_epoch_numbers_fall_back_to_botocore(seconds: int, fraction: str) -> None:
    """botocore gives epoch numbers in the host's local zone (``tzlocal()``),
    not UTC; we give botocore's answer unchanged. S3 sends none in XML."""
    text = f"{seconds}{fraction}"
    ours = assert_same_as_botocore(text, in_utc=False)
    assert ours == datetime.fromtimestamp(float(text), UTC)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-25T10:00:00.1234567Z",  # more digits than microseconds
        "2026-11-25T10:00:00.123456789Z",
        "2026-11-25T10:00:00-00:00",
        "2026-11-25T12:00:00+02:00",
        "2026-11-25T10:00:00",  # no zone: botocore gives a naive time
        "2026-11-25 10:00:00Z",
        "20261125T100000Z",
        "2026-11-25T10:00Z",
        "2026-11-25T10:00:00z",
    ],
)
def test_other_forms_are_botocores_answer(text: str) -> None:
    assert not _UTC_ISO.fullmatch(text)
    ours = parse_timestamp(text)
    theirs = botocore_parse_timestamp(text)
    assert ours == theirs
    assert type(ours.tzinfo) is type(theirs.tzinfo)


def outcome(reader: Callable[[str], datetime], text: str) -> tuple[str, object]:
    """What ``reader`` does with ``text``: its value, or its error's type
    and message."""
    try:
        return "value", reader(text)
    except Exception as error:
        return "error", (type(error), str(error))


@given(st.from_regex(_UTC_ISO, fullmatch=True))
@example("2026-13-01T00:00:00Z")
@example("2026-02-30T00:00:00Z")
@example("2026-11-25T24:00:00Z")
@example("2026-11-25T10:60:00Z")
@example("2026-11-25T10:00:60Z")
@example("0000-01-01T00:00:00Z")
def test_fast_shapes_with_any_digits_give_botocores_value_or_error(text: str) -> None:
    """Every string the fast path looks at, valid or not (month 13, hour
    24, year 0): the same value, or botocore's own error."""
    assert outcome(parse_timestamp, text) == outcome(botocore_parse_timestamp, text)


@given(st.text(max_size=40))
@example("")
@example("garbage")
@example("2026-11-25T10:00:00.Z")
@example("2026-W48-3T10:00:00Z")
@example("nan")
def test_garbage_gives_botocores_error(text: str) -> None:
    assert outcome(parse_timestamp, text) == outcome(botocore_parse_timestamp, text)


@given(st.lists(MOMENTS, min_size=2, max_size=20), st.sampled_from([0, 3, 6]))
def test_times_order_with_utc_times_and_botocores(moments: list[datetime], digits: int) -> None:
    """epochgc compares store times with ``datetime.UTC`` clocks: ordering,
    equality and hashing are by instant whatever the zone object."""
    texts = [iso(m, digits, "Z") for m in moments]
    ours = [parse_timestamp(t) for t in texts]
    theirs = [botocore_parse_timestamp(t) for t in texts]
    utc = [truncated(m, digits) for m in moments]
    assert sorted(ours) == sorted(theirs) == sorted(utc)
    assert {*ours} == {*theirs} == {*utc}
    assert [a - b for a, b in zip(ours, utc, strict=True)] == [timedelta(0)] * len(ours)
