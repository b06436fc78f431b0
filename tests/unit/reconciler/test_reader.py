"""``check_read_back``: what the demo and ``epochgc verify`` count as
acknowledged records read back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochgc.reconciler.reader import check_read_back


def test_all_read_back_is_no_problem() -> None:
    assert check_read_back("t/0", {0: b"a", 1: b"b"}, {0: b"a", 1: b"b", 2: b"c"}) == (2, None)


def test_a_missing_or_different_record_is_named_by_its_first_offset() -> None:
    verified, problem = check_read_back("t/0", {0: b"a", 1: b"b", 5: b"x"}, {0: b"a", 5: b"y"})
    assert verified == 1
    assert problem == "t/0: 2 acknowledged records missing or different (first at offset 1)"


@given(
    st.dictionaries(st.integers(0, 50), st.binary(max_size=2)),
    st.dictionaries(st.integers(0, 50), st.binary(max_size=2)),
)
def test_verified_plus_wrong_is_every_acknowledged_record(
    acked: dict[int, bytes], stored: dict[int, bytes]
) -> None:
    verified, problem = check_read_back("p", acked, stored)
    matching = sum(1 for offset, record in acked.items() if stored.get(offset) == record)
    assert verified == matching
    assert (problem is None) == (matching == len(acked))
