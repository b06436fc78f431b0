"""L0/L1 object layout: round trips and refusal of damaged objects."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError
from epochgc.storage.l0_format import build_l0_object, decode_records, encode_records
from tests.support.l0_footer import read_footer

records_lists = st.lists(st.binary(max_size=64), min_size=1, max_size=8)
chunk_lists = st.lists(
    st.tuples(st.sampled_from(["orders", "clicks", "a.b-c_d"]), st.integers(0, 99), records_lists),
    min_size=1,
    max_size=6,
)


@given(st.lists(st.binary(max_size=100), max_size=20))
def test_records_round_trip(records: list[bytes]) -> None:
    assert decode_records(encode_records(records), expected=len(records)) == records


@given(chunk_lists)
def test_every_chunk_reads_back_from_its_byte_range(
    chunks: list[tuple[str, int, list[bytes]]],
) -> None:
    body, index = build_l0_object(chunks)
    assert read_footer(body) == index
    for (topic, partition, records), ref in zip(chunks, index, strict=True):
        assert (ref.topic, ref.partition, ref.records) == (topic, partition, len(records))
        data = body[ref.byte_offset : ref.byte_offset + ref.byte_length]
        assert decode_records(data, expected=ref.records) == records


def test_damaged_chunks_are_refused() -> None:
    with pytest.raises(MalformedRecordError, match="expected 3"):
        decode_records(encode_records([b"a", b"b"]), expected=3)
    with pytest.raises(MalformedRecordError, match="claims"):
        decode_records(encode_records([b"abc"])[:-1])
    with pytest.raises(MalformedRecordError, match="truncated"):
        decode_records(b"\x00\x00")


def test_empty_objects_and_chunks_are_refused() -> None:
    with pytest.raises(ValueError):
        build_l0_object([])
    with pytest.raises(ValueError):
        build_l0_object([("orders", 0, [])])
