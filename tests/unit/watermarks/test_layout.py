"""Telling layout-1 keys from layout-2 keys, and the layout marker codec."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.watermarks.layout import (
    KeyLayout,
    classify_l1_key,
    classify_partition_key,
    decode_layout_marker,
    encode_layout_marker,
)

ROOT = "epochgc"
NAME = f"{0:020d}-{4:020d}-0b9a4d4e-4f0e-4d2c-9a57-3c2f1e0d9b8a"


@pytest.mark.parametrize(
    ("key", "layout"),
    [
        ("epochgc/meta/partitions/orders/3/log/00000000000000000007", KeyLayout.V1),
        ("epochgc/meta/partitions/orders/3/snapshot", KeyLayout.V1),
        ("epochgc/meta/partitions/orders/12/3/log/00000000000000000007", KeyLayout.V2),
        ("epochgc/meta/partitions/orders/12/3/snapshot", KeyLayout.V2),
        ("epochgc/meta/partitions/orders/x/3/snapshot", KeyLayout.UNKNOWN),
        ("epochgc/meta/partitions/orders", KeyLayout.UNKNOWN),
    ],
)
def test_partition_keys(key: str, layout: KeyLayout) -> None:
    assert classify_partition_key(key, ROOT) is layout


@pytest.mark.parametrize(
    ("key", "layout"),
    [
        (f"epochgc/l1/orders/3/{NAME}", KeyLayout.V1),
        (f"epochgc/l1/orders/12/3/{NAME}", KeyLayout.V2),
        (f"epochgc/l1/orders/{NAME}", KeyLayout.UNKNOWN),
    ],
)
def test_l1_keys(key: str, layout: KeyLayout) -> None:
    assert classify_l1_key(key, ROOT) is layout


def test_marker_round_trip_and_refusals() -> None:
    assert decode_layout_marker(encode_layout_marker(2), "m") == 2
    with pytest.raises(UnsupportedVersionError):
        decode_layout_marker(b'{"v": 2, "layout": 2}', "m")
    with pytest.raises(MalformedRecordError):
        decode_layout_marker(b'{"v": 1}', "m")


@given(st.binary(max_size=80))
def test_marker_parse_raises_only_its_errors(data: bytes) -> None:
    with contextlib.suppress(MalformedRecordError, UnsupportedVersionError):
        decode_layout_marker(data, "m")


@given(st.text(max_size=120))
def test_classifiers_never_raise(text: str) -> None:
    classify_partition_key(f"{ROOT}/meta/partitions/{text}", ROOT)
    classify_l1_key(f"{ROOT}/l1/{text}", ROOT)
