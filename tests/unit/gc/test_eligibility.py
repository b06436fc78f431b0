"""The deletion rule: only parsed L0 keys under the root, epoch <= M, old enough."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.eligibility import Verdict, judge
from epochgc.storage.keys import encode_l0_key, parse_l0_key

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
OLD = NOW - timedelta(hours=2)
HOUR = timedelta(hours=1)
UUID = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"


def verdict(key: str, safe_epoch: int = 80, modified: datetime = OLD) -> Verdict:
    return judge(key, modified, root="epochgc", safe_epoch=safe_epoch, now=NOW, min_age=HOUR)[0]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (encode_l0_key("epochgc", 3, 80, UUID), Verdict.ELIGIBLE),
        (encode_l0_key("epochgc", 3, 81, UUID), Verdict.ABOVE_SAFE_EPOCH),
        (encode_l0_key("epochgc2", 3, 1, UUID), Verdict.OUTSIDE_ROOT),
        (encode_l0_key("epochgc", 3, 1, UUID).replace("/003/", "/3/"), Verdict.UNPARSEABLE),
        ("epochgc/l0/003/junk", Verdict.UNPARSEABLE),
        ("epochgc/meta/controller/00000000000000000001", Verdict.OUTSIDE_ROOT),
        ("other/l0/003/000000000000000001/" + UUID, Verdict.OUTSIDE_ROOT),
    ],
)
def test_verdicts(key: str, expected: Verdict) -> None:
    assert verdict(key) is expected


def test_too_young_objects_wait() -> None:
    key = encode_l0_key("epochgc", 3, 5, UUID)
    assert verdict(key, modified=NOW - timedelta(minutes=59)) is Verdict.TOO_YOUNG
    assert verdict(key, modified=NOW - HOUR) is Verdict.ELIGIBLE


@given(st.text(max_size=120), st.integers(-1, 10**6), st.integers(0, 10**6))
def test_nothing_but_a_parsed_key_at_or_below_m_is_ever_eligible(
    key: str, safe_epoch: int, age_seconds: int
) -> None:
    result, parsed = judge(
        key,
        NOW - timedelta(seconds=age_seconds),
        root="epochgc",
        safe_epoch=safe_epoch,
        now=NOW,
        min_age=HOUR,
    )
    if result is Verdict.ELIGIBLE:
        assert parsed is not None and parsed == parse_l0_key(key, "epochgc")
        assert parsed.epoch <= safe_epoch and age_seconds >= 3600


@given(st.integers(0, 999), st.integers(0, 10**6), st.integers(-1, 10**6))
def test_eligible_exactly_when_epoch_at_most_m(shard: int, epoch: int, safe_epoch: int) -> None:
    key = encode_l0_key("epochgc", shard, epoch, UUID)
    assert (verdict(key, safe_epoch) is Verdict.ELIGIBLE) == (epoch <= safe_epoch)
