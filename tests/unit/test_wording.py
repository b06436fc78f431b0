from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochgc.wording import counted


def test_one_is_singular_and_others_plural() -> None:
    assert counted(1, "partition") == "1 partition"
    assert counted(0, "partition") == "0 partitions"
    assert counted(2, "entry", "entries") == "2 entries"


@given(st.integers(min_value=2, max_value=10**9))
def test_every_count_above_one_is_plural(n: int) -> None:
    assert counted(n, "node") == f"{n} nodes"
