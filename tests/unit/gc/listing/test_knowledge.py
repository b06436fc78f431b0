"""Shard knowledge (``gc.listing.knowledge``): a shard's floor and the time
from which it may hold eligible objects, what a listing and a quiet round
teach, the stored-time rule on past and future times, and the document's
codec (lossy only where the contract says, forward compatible, strict
about everything else). The scheduling that uses it is tested in
``test_schedule.py`` and ``test_plan.py``."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.gc.listing.knowledge import (
    KNOWLEDGE_VERSION,
    RATE_SMOOTHING,
    ShardFacts,
    ShardKnowledge,
    ShardObservation,
    decode_knowledge,
    encode_knowledge,
    mark_quiet,
    observe_listing,
    trust_knowledge,
)

T0 = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
MARGIN = 60.0

epochs = st.integers(min_value=0, max_value=10**9)
moments = st.datetimes(
    min_value=datetime(2020, 1, 1),
    max_value=datetime(2030, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)


def facts(
    listed_at: datetime = T0,
    safe_epoch: int = 10,
    lowest: int | None = None,
    rate: float = 0.0,
    quiet_at: datetime | None = None,
) -> ShardFacts:
    return ShardFacts(listed_at, safe_epoch, lowest, rate, quiet_at)


# --- what a shard can hold -----------------------------------------------------


@given(epochs, st.none() | epochs)
def test_the_floor_is_the_lowest_kept_epoch_or_the_first_epoch_above_m(
    safe_epoch: int, lowest: int | None
) -> None:
    floor = facts(safe_epoch=safe_epoch, lowest=lowest).floor_epoch
    assert floor <= safe_epoch + 1, "new accepted writes carry epochs above M"
    if lowest is None:
        assert floor == safe_epoch + 1
    else:
        assert floor == min(lowest, safe_epoch + 1)


def test_eligible_from_is_the_later_of_the_listing_and_the_last_quiet_round() -> None:
    later = T0 + timedelta(minutes=5)
    assert facts(listed_at=T0).eligible_from == T0
    assert facts(listed_at=T0, quiet_at=later).eligible_from == later
    assert facts(listed_at=later, quiet_at=T0).eligible_from == later
    assert facts(listed_at=T0, quiet_at=T0).eligible_from == T0


# --- what a listing and a quiet round teach ------------------------------------


def test_a_first_listing_records_its_facts_and_leaves_the_rate_at_0() -> None:
    seen = ShardObservation(eligible=4, eligible_bytes=4000, lowest_kept_epoch=17)
    assert observe_listing(None, seen, safe_epoch=15, now=T0) == ShardFacts(T0, 15, 17, 0.0)


def test_a_listing_measures_the_rate_since_the_shard_could_first_hold_eligible_bytes() -> None:
    quiet = facts(listed_at=T0, quiet_at=T0 + timedelta(seconds=100))
    now = T0 + timedelta(seconds=300)
    after = observe_listing(quiet, ShardObservation(1, 1000), safe_epoch=12, now=now)
    assert after.bytes_per_second == 1000 / 200, "measured from the quiet round"
    assert (after.listed_at, after.safe_epoch, after.lowest_epoch) == (now, 12, None)
    assert after.quiet_at is None, "a listing starts a new quiet period"


def test_a_listing_smooths_the_new_sample_into_a_known_rate() -> None:
    known = facts(listed_at=T0, rate=30.0)
    now = T0 + timedelta(seconds=100)
    after = observe_listing(known, ShardObservation(1, 1000), safe_epoch=10, now=now)
    assert after.bytes_per_second == RATE_SMOOTHING * 10.0 + (1 - RATE_SMOOTHING) * 30.0


def test_a_listing_no_later_than_the_last_one_keeps_the_rate() -> None:
    known = facts(listed_at=T0, rate=7.5)
    for now in (T0, T0 - timedelta(seconds=1)):
        after = observe_listing(known, ShardObservation(1, 10**9), safe_epoch=11, now=now)
        assert after.bytes_per_second == 7.5 and after.listed_at == now


@given(
    st.floats(min_value=0.0, max_value=1e9),
    st.integers(min_value=0, max_value=10**12),
    st.integers(min_value=1, max_value=10**6),
)
def test_the_smoothed_rate_lies_between_the_old_rate_and_the_new_sample(
    old: float, found_bytes: int, elapsed: int
) -> None:
    known = facts(listed_at=T0, rate=old)
    now = T0 + timedelta(seconds=elapsed)
    rate = observe_listing(known, ShardObservation(1, found_bytes), safe_epoch=10, now=now)
    sample = found_bytes / elapsed
    low, high = (0.0, sample) if old == 0 else sorted((old, sample))
    assert low <= rate.bytes_per_second <= high
    if old == 0:
        assert rate.bytes_per_second == sample


def test_a_quiet_round_moves_only_quiet_at() -> None:
    known = facts(listed_at=T0, lowest=12, rate=3.0)
    later = T0 + timedelta(minutes=7)
    quiet = mark_quiet(known, later)
    assert quiet == dataclasses.replace(known, quiet_at=later)
    assert quiet.eligible_from == later


# --- the stored-time rule ------------------------------------------------------


def test_times_from_the_past_or_within_the_margin_are_kept_and_report_nothing() -> None:
    past = T0 - timedelta(days=3)
    stored = ShardKnowledge({3: facts(past, quiet_at=past)}, past, past, "gc-slow")
    assert trust_knowledge(stored, T0, MARGIN) == (stored, ())


def test_a_quiet_time_from_the_future_is_dropped_but_the_shard_is_kept() -> None:
    ahead = T0 + timedelta(days=2)
    stored = ShardKnowledge({3: facts(T0, lowest=12, quiet_at=ahead)}, T0, T0, "gc-fast")
    trusted, found = trust_knowledge(stored, T0, MARGIN)
    assert trusted.shards == {3: facts(T0, lowest=12)}
    assert [(f.writer, f.field, f.skew_seconds) for f in found] == [
        ("gc-fast", "shards.003.quiet_at", 2 * 86400.0)
    ]
    assert trusted.written_by == "gc-fast"


# --- the document --------------------------------------------------------------

facts_strategy = st.builds(
    ShardFacts,
    listed_at=moments,
    safe_epoch=epochs,
    lowest_epoch=st.none() | epochs,
    bytes_per_second=st.floats(min_value=0.0, max_value=1e12),
    quiet_at=st.none() | moments,
)
knowledge_strategy = st.builds(
    ShardKnowledge,
    shards=st.dictionaries(st.integers(0, 999), facts_strategy, max_size=5),
    full_sweep_at=st.none() | moments,
    discovered_at=st.none() | moments,
    written_by=st.text(max_size=20),
)


def truncated(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.replace(microsecond=0)


@given(knowledge_strategy)
def test_the_document_keeps_everything_but_sub_second_times_and_rate_digits(
    knowledge: ShardKnowledge,
) -> None:
    expected = ShardKnowledge(
        shards={
            shard: ShardFacts(
                listed_at=f.listed_at.replace(microsecond=0),
                safe_epoch=f.safe_epoch,
                lowest_epoch=f.lowest_epoch,
                bytes_per_second=round(f.bytes_per_second, 3),
                quiet_at=truncated(f.quiet_at),
            )
            for shard, f in knowledge.shards.items()
        },
        full_sweep_at=truncated(knowledge.full_sweep_at),
        discovered_at=truncated(knowledge.discovered_at),
        written_by=knowledge.written_by,
    )
    decoded = decode_knowledge(encode_knowledge(knowledge))
    assert decoded == expected
    assert all(
        t.tzinfo is UTC
        for f in decoded.shards.values()
        for t in (f.listed_at, f.quiet_at)
        if t is not None
    )


@given(st.permutations(range(5)))
def test_equal_knowledge_gives_identical_bytes_whatever_the_shard_order(
    order: list[int],
) -> None:
    shards = {s: facts(lowest=s) for s in order}
    in_order = {s: facts(lowest=s) for s in range(5)}
    assert encode_knowledge(ShardKnowledge(shards)) == encode_knowledge(ShardKnowledge(in_order))


def test_the_document_names_shards_with_three_digits_and_writes_utc_times() -> None:
    cet = timezone(timedelta(hours=1))
    knowledge = ShardKnowledge({7: facts(T0.astimezone(cet), rate=1.23456)}, T0, None, "gc@h")
    doc = json.loads(encode_knowledge(knowledge))
    assert doc == {
        "v": KNOWLEDGE_VERSION,
        "full_sweep_at": "2026-11-24T05:00:00Z",
        "discovered_at": None,
        "written_by": "gc@h",
        "shards": {
            "007": {
                "listed_at": "2026-11-24T05:00:00Z",
                "safe_epoch": 10,
                "lowest_epoch": None,
                "bytes_per_second": 1.235,
                "quiet_at": None,
            }
        },
    }


def encoded(**changes: Any) -> dict[str, Any]:
    """A valid document with shard ``001``, with top-level ``changes``."""
    doc = json.loads(encode_knowledge(ShardKnowledge({1: facts(lowest=11)}, T0, T0, "gc")))
    assert isinstance(doc, dict)
    return {**doc, **changes}


def with_shard(**changes: Any) -> dict[str, Any]:
    """The valid document with shard ``001``'s fields changed (``None``
    values remove the field)."""
    doc = encoded()
    item = {**doc["shards"]["001"], **changes}
    doc["shards"]["001"] = {k: v for k, v in item.items() if v is not None}
    return doc


def read(doc: object) -> ShardKnowledge:
    return decode_knowledge(json.dumps(doc).encode())


def test_unknown_fields_are_ignored_at_the_top_and_in_a_shard() -> None:
    doc = encoded(future_field={"x": 1})
    doc["shards"]["001"]["future_field"] = [1, 2]
    assert read(doc) == read(encoded())


def test_optional_fields_may_be_absent() -> None:
    doc = {
        "v": 1,
        "shards": {"001": {"listed_at": "2026-11-24T05:00:00Z", "safe_epoch": 10}},
    }
    assert read(doc) == ShardKnowledge({1: facts(T0)})


@pytest.mark.parametrize("version", [KNOWLEDGE_VERSION + 1, 99])
def test_a_newer_version_is_refused(version: int) -> None:
    with pytest.raises(UnsupportedVersionError):
        read(encoded(v=version))


MALFORMED: dict[str, object] = {
    "not an object": [1, 2],
    "no version": {k: v for k, v in encoded().items() if k != "v"},
    "version 0": encoded(v=0),
    "boolean version": encoded(v=True),
    "no shards": {k: v for k, v in encoded().items() if k != "shards"},
    "shards not an object": encoded(shards=[]),
    "short shard name": encoded(shards={"1": encoded()["shards"]["001"]}),
    "long shard name": encoded(shards={"0001": encoded()["shards"]["001"]}),
    "shard name not digits": encoded(shards={"abc": encoded()["shards"]["001"]}),
    "shard not an object": encoded(shards={"001": 5}),
    "no listed_at": with_shard(listed_at=None),
    "listed_at not a string": with_shard(listed_at=1700000000),
    "listed_at not a time": with_shard(listed_at="yesterday"),
    "listed_at without offset": with_shard(listed_at="2026-11-24T05:00:00"),
    "no safe_epoch": with_shard(safe_epoch=None),
    "negative safe_epoch": with_shard(safe_epoch=-1),
    "boolean safe_epoch": with_shard(safe_epoch=True),
    "fractional safe_epoch": with_shard(safe_epoch=1.5),
    "negative lowest_epoch": with_shard(lowest_epoch=-3),
    "string lowest_epoch": with_shard(lowest_epoch="4"),
    "negative rate": with_shard(bytes_per_second=-0.5),
    "boolean rate": with_shard(bytes_per_second=True),
    "string rate": with_shard(bytes_per_second="1"),
    "quiet_at not a time": with_shard(quiet_at="soon"),
    "written_by not a string": encoded(written_by=7),
    "full_sweep_at not a time": encoded(full_sweep_at=5),
    "discovered_at not a time": encoded(discovered_at="never"),
}


@pytest.mark.parametrize("doc", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_document_is_refused(doc: object) -> None:
    with pytest.raises(MalformedRecordError):
        read(doc)


@pytest.mark.parametrize("data", [b"", b"\xff{}", b"{", b"null"])
def test_bytes_that_are_not_a_json_object_are_refused(data: bytes) -> None:
    with pytest.raises(MalformedRecordError):
        decode_knowledge(data)


def test_a_rate_that_is_not_a_number_is_refused() -> None:
    data = json.dumps(with_shard(bytes_per_second=float("nan"))).encode()
    assert b"NaN" in data
    with pytest.raises(MalformedRecordError, match="bytes_per_second"):
        decode_knowledge(data)


def test_the_error_names_the_document_and_the_shard() -> None:
    with pytest.raises(MalformedRecordError, match=r"^gc/shards/state, shard 001: 'safe_epoch'"):
        decode_knowledge(json.dumps(with_shard(safe_epoch=-1)).encode(), "gc/shards/state")
