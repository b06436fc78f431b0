"""The stored-time rule (``epochgc.storage.stored_time``): a time ahead of the
reader's clock by more than the margin is unknown; any other is used, never
later than the reader's ``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from epochgc.storage.stored_time import (
    find_future,
    is_from_future,
    read_stored_time,
    skew_seconds,
    stored_age_seconds,
)

NOW = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
offsets = st.floats(min_value=-90 * 86400, max_value=90 * 86400, allow_nan=False)
margins = st.floats(min_value=0, max_value=3600, allow_nan=False)


@given(offsets, margins)
def test_a_stored_time_is_unknown_exactly_when_it_is_beyond_the_margin(
    offset: float, margin: float
) -> None:
    stored = NOW + timedelta(seconds=offset)
    read = read_stored_time(stored, NOW, margin)
    beyond = (stored - NOW).total_seconds() > margin
    assert (read is None) == beyond == is_from_future(stored, NOW, margin)
    if read is not None:
        assert read <= NOW, "a time read is never later than the reader's clock"
        assert read <= stored, "reading never moves a time forward"
        assert read == stored or stored > NOW


@given(offsets, margins)
def test_an_age_is_never_negative_and_unknown_only_from_the_future(
    offset: float, margin: float
) -> None:
    stored = NOW + timedelta(seconds=offset)
    age = stored_age_seconds(stored, NOW, margin)
    if age is None:
        assert is_from_future(stored, NOW, margin)
    else:
        assert age >= 0
        assert age == max(0.0, (NOW - stored).total_seconds())


@given(offsets, offsets, margins)
def test_an_older_stored_time_never_reads_as_more_recent(a: float, b: float, margin: float) -> None:
    """Monotone: what keeps work due for a time keeps it due for an older one."""
    older, newer = sorted((a, b))
    read_old = read_stored_time(NOW + timedelta(seconds=older), NOW, margin)
    read_new = read_stored_time(NOW + timedelta(seconds=newer), NOW, margin)
    if read_old is not None and read_new is not None:
        assert read_old <= read_new


def test_the_finding_names_writer_field_and_skew() -> None:
    ahead = NOW + timedelta(days=30)
    found = find_future("shard_knowledge", "gc-b", "full_sweep_at", ahead, NOW, 60.0)
    assert found is not None and found.writer == "gc-b" and found.field == "full_sweep_at"
    assert found.skew_seconds == skew_seconds(ahead, NOW) == 30 * 86400
    assert find_future("report", "n", "generated_at", NOW + timedelta(seconds=59), NOW, 60) is None
    assert find_future("report", "n", "generated_at", None, NOW, 60) is None
