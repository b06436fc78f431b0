"""Coalescing the byte ranges of one L0 object into one ranged GET."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochgc.reconciler.fetch import RangeFetch, plan_fetches
from epochgc.watermarks.partition.commands import PlaceholderBatch


def test_ranges_of_one_object_become_one_get() -> None:
    batches = [
        PlaceholderBatch("l0/a", 100, 50, 1),
        PlaceholderBatch("l0/b", 0, 10, 1),
        PlaceholderBatch("l0/a", 0, 20, 1),
    ]
    assert plan_fetches(batches) == [RangeFetch("l0/a", 0, 149), RangeFetch("l0/b", 0, 9)]


@given(
    st.lists(
        st.builds(
            PlaceholderBatch,
            l0_key=st.sampled_from(["x", "y", "z"]),
            byte_offset=st.integers(0, 10_000),
            byte_length=st.integers(1, 500),
            records=st.integers(1, 5),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_every_range_is_covered_by_exactly_one_get(batches: list[PlaceholderBatch]) -> None:
    fetches = plan_fetches(batches)
    assert len(fetches) == len({b.l0_key for b in batches})
    by_key = {f.key: f for f in fetches}
    for batch in batches:
        fetch = by_key[batch.l0_key]
        assert fetch.first_byte <= batch.byte_offset
        assert batch.byte_offset + batch.byte_length - 1 <= fetch.last_byte
