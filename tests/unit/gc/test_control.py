"""Control and status documents: codecs, and how the collector follows
pause, resume and reset requests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import Collector, RoundOutcome
from epochgc.gc.control import (
    CollectorState,
    ControlDocument,
    DeletingJob,
    HeldJob,
    StatusDocument,
    decode_control,
    decode_status,
    encode_control,
    encode_status,
)
from epochgc.storage.request_stats import RequestStats
from epochgc.watermarks.safe_epoch.aggregate import SafeEpoch

times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda t: t.replace(microsecond=0))


@given(
    paused=st.booleans(),
    reason=st.text(max_size=50),
    by=st.text(max_size=20),
    at=times,
    generation=st.integers(min_value=0, max_value=10**9),
)
def test_control_round_trips(
    paused: bool, reason: str, by: str, at: datetime, generation: int
) -> None:
    doc = ControlDocument(paused, reason, by, at, generation)
    assert decode_control(encode_control(doc)) == doc


@given(state=st.sampled_from(CollectorState), m=st.none() | st.integers(0, 10**12), at=times)
def test_status_round_trips(state: CollectorState, m: int | None, at: datetime) -> None:
    doc = StatusDocument(state, "gc-1/abc", at, m, m, "run-1", "idle", at, None, "detail")
    assert decode_status(encode_status(doc)) == doc


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b'{"v": 1}',
        b'{"v": 1, "paused": "yes", "updated_at": "2026-11-22T03:00:00Z", "reset_generation": 0}',
        b'{"v": 1, "paused": true, "updated_at": "yesterday", "reset_generation": 0}',
        b'{"v": 1, "paused": true, "updated_at": "2026-11-22T03:00:00Z", "reset_generation": -1}',
    ],
)
def test_malformed_control_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedRecordError):
        decode_control(data)


def test_newer_control_version_is_refused() -> None:
    with pytest.raises(UnsupportedVersionError):
        decode_control(b'{"v": 2, "paused": true}')


class _NoStore:
    """The collector under test never reaches the store."""


def collector() -> Collector:
    settings = CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0)
    return Collector(_NoStore(), RequestStats(), "epochgc", settings, blocked_after=2)  # type: ignore[arg-type]


NOW = datetime(2026, 11, 22, tzinfo=UTC)


def test_pause_and_resume_are_followed() -> None:
    c = collector()
    c.apply_control(ControlDocument(paused=True, updated_by="op", updated_at=NOW))
    assert c.state is CollectorState.PAUSED
    report = c.run_round()
    assert report.outcome is RoundOutcome.PAUSED
    c.apply_control(ControlDocument(paused=False, updated_by="op", updated_at=NOW))
    assert c.state is CollectorState.RUNNING


def block(c: Collector) -> None:
    for _ in range(2):
        c.tracker.failed(RuntimeError("unreadable controller entry"))
    c._untrusted("unreadable")


def test_only_a_new_reset_leaves_safety_blocked() -> None:
    c = collector()
    c.apply_control(ControlDocument(reset_generation=5))  # baseline: an old reset
    block(c)
    assert c.state is CollectorState.SAFETY_BLOCKED
    c.apply_control(ControlDocument(reset_generation=5))
    c.apply_control(ControlDocument(paused=False, reset_generation=5))
    assert c.state is CollectorState.SAFETY_BLOCKED, "resume must not clear a block"
    assert c.run_round().outcome is RoundOutcome.BLOCKED
    c.apply_control(ControlDocument(reset_generation=6))
    assert c.state is CollectorState.RUNNING
    assert not c.tracker.is_blocked


def test_reset_keeps_the_highest_m() -> None:
    c = collector()
    c.apply_control(ControlDocument())
    c.tracker.observe(SafeEpoch(40, 50, (), 0, 0, None))
    block(c)
    c.apply_control(ControlDocument(reset_generation=1))
    assert c.tracker.observe(SafeEpoch(10, 50, (), 0, 0, None)).safe_epoch == 40


def test_a_stopping_collector_ignores_control() -> None:
    c = collector()
    c.begin_stopping()
    c.apply_control(ControlDocument(paused=True))
    assert c.state is CollectorState.STOPPING


@given(
    held=st.lists(st.tuples(st.sampled_from(DeletingJob), times), unique_by=lambda h: h[0]),
    at=times,
)
def test_status_with_held_jobs_round_trips(
    held: list[tuple[DeletingJob, datetime]], at: datetime
) -> None:
    doc = StatusDocument(
        CollectorState.PAUSED, "gc-1/abc", at, held=tuple(HeldJob(j, s) for j, s in held)
    )
    assert decode_status(encode_status(doc)) == doc


def test_status_held_jobs_from_a_newer_writer_or_malformed() -> None:
    base = '{"v": 1, "state": "paused", "holder": "h", "updated_at": "2026-11-22T03:00:00Z"'
    old = decode_status(f"{base}}}".encode())
    assert old.held == (), "an older writer omits it"
    newer = decode_status(
        f'{base}, "held": [{{"job": "shredding", "since": "2026-11-22T03:00:00Z"}},'
        f' {{"job": "janitor", "since": "2026-11-22T03:00:00Z"}}]}}'.encode()
    )
    assert [h.job for h in newer.held] == [DeletingJob.JANITOR], "unknown jobs skipped"
    for bad in ('"held": {}', '"held": ["janitor"]', '"held": [{"job": "janitor"}]'):
        with pytest.raises(MalformedRecordError):
            decode_status(f"{base}, {bad}}}".encode())
