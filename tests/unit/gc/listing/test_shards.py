"""Which prefixes under ``{root}/l0/`` are shards a round sweeps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.listing.shards import parse_shard_prefixes
from epochgc.storage.keys import l0_shard_prefix

ROOT = "epochgc"


def test_shards_beyond_the_configured_count_are_found_and_the_rest_is_foreign() -> None:
    prefixes = [
        f"{ROOT}/l0/000/",
        f"{ROOT}/l0/017/",
        f"{ROOT}/l0/999/",
        f"{ROOT}/l0/0007/",
        f"{ROOT}/l0/7/",
        f"{ROOT}/l0/ab1/",
        f"{ROOT}/l0/-01/",
        f"{ROOT}2/l0/001/",
    ]
    found = parse_shard_prefixes(prefixes, ROOT)
    assert found.shards == (0, 17, 999)
    assert found.foreign == tuple(prefixes[3:])


@given(st.sets(st.integers(0, 999)))
def test_every_shard_prefix_is_a_shard(shards: set[int]) -> None:
    found = parse_shard_prefixes([l0_shard_prefix(ROOT, s) for s in shards], ROOT)
    assert found.shards == tuple(sorted(shards)) and found.foreign == ()


@given(st.text(min_size=1, max_size=6).filter(lambda t: "/" not in t))
def test_a_segment_that_is_not_three_digits_is_never_a_shard(segment: str) -> None:
    found = parse_shard_prefixes([f"{ROOT}/l0/{segment}/"], ROOT)
    is_shard = len(segment) == 3 and all(c in "0123456789" for c in segment)
    assert found.shards == ((int(segment),) if is_shard else ())
