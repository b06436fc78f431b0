"""Prices and the economic listing interval (pure)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.listing.cost import GB, Prices, cost_per_gb, economic_interval_seconds


def test_requests_are_priced_by_class() -> None:
    prices = Prices()
    assert prices.request_cost({"ListObjectsV2": 1000}) == pytest.approx(0.005)
    assert prices.request_cost({"PutObject": 2000}) == pytest.approx(0.010)
    assert prices.request_cost({"DeleteObjects": 5000}) == 0.0, "deletes are free on S3"
    assert prices.request_cost({"GetObject": 1000, "HeadObject": 1000}) == pytest.approx(0.0008)


def test_storage_is_priced_per_gb_month() -> None:
    month = 30 * 86400
    assert GB * month * Prices().storage_per_byte_second == pytest.approx(0.023)


@given(
    rate=st.floats(min_value=1.0, max_value=1e10),
    list_price=st.floats(min_value=1e-4, max_value=1.0),
    storage_price=st.floats(min_value=1e-4, max_value=1.0),
)
def test_at_the_economic_interval_waiting_bytes_have_cost_one_list(
    rate: float, list_price: float, storage_price: float
) -> None:
    prices = Prices(list_per_1000=list_price, storage_per_gb_month=storage_price)
    interval = economic_interval_seconds(rate, prices)
    waited = rate * interval**2 / 2 * prices.storage_per_byte_second  # ∫0^T r t dt byte-seconds
    assert waited == pytest.approx(list_price / 1000, rel=1e-6)

    def per_second(t: float) -> float:
        return list_price / 1000 / t + prices.storage_per_byte_second * rate * t / 2

    assert per_second(interval) <= per_second(interval * 1.1)
    assert per_second(interval) <= per_second(interval / 1.1)


def test_the_interval_at_s3_prices() -> None:
    one_mb_per_second = economic_interval_seconds(2**20, Prices())
    assert 900 < one_mb_per_second < 1300, "about 18 minutes at 1 MB/s per shard"
    assert economic_interval_seconds(0.0, Prices()) == math.inf


def test_cost_per_gb_reclaimed() -> None:
    assert cost_per_gb(0.01, GB * 2) == pytest.approx(0.005)
    assert cost_per_gb(0.01, 0) is None
