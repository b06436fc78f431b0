from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochgc.wording import counted, human_bytes


def test_one_is_singular_and_others_plural() -> None:
    assert counted(1, "partition") == "1 partition"
    assert counted(0, "partition") == "0 partitions"
    assert counted(2, "entry", "entries") == "2 entries"


@given(st.integers(min_value=2, max_value=10**9))
def test_every_count_above_one_is_plural(n: int) -> None:
    assert counted(n, "node") == f"{n} nodes"


@given(st.integers(min_value=0, max_value=2**50))
def test_human_bytes_keeps_the_figure_between_1_and_1024(n: int) -> None:
    text = human_bytes(n)
    figure, unit = text.split(" ")
    if n < 1024:
        assert text == counted(n, "byte")
    else:
        assert unit in ("KiB", "MiB", "GiB", "TiB") and 1 <= float(figure) < 1024.05
