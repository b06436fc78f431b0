"""What collection costs, at configurable prices, and the economic listing
interval. Pure: no I/O, no clock.

Prices (``[cost]``, S3 Standard's published defaults) are per 1000 requests
by class, and per GB-month of storage:

* LIST-class: ``ListObjectsV2``, ``PutObject``, ``CopyObject``, POSTs; S3
  bills these alike (``list_price_per_1000``, $0.005).
* deletes: ``DeleteObjects`` and ``DeleteObject`` (``delete_price_per_1000``,
  free on S3).
* GET-class: ``GetObject``, ``HeadObject`` and everything else
  (``get_price_per_1000``, $0.0004).
* storage: ``storage_price_per_gb_month`` ($0.023, the first tier), where a
  GB is 2^30 bytes and a month 30 days, as S3 bills it.

The economic interval. A shard into which eligible bytes arrive at ``r``
bytes per second, listed every ``T`` seconds, keeps on average ``r T / 2``
eligible bytes waiting, which costs ``s r T / 2`` per second (``s`` the
storage price per byte-second); each listing costs ``L``, i.e. ``L / T``
per second. The sum ``L / T + s r T / 2`` is smallest at

    T* = sqrt(2 L / (s r))

which is also the interval after which the storage cost of the bytes that
accumulated since the last listing, ``∫0^T s r t dt = s r T² / 2``, equals
one LIST's price: list when the waiting bytes have cost what a LIST costs.
At S3 prices, ``T*`` is about 18 minutes for 1 MB/s per shard (1 GB/s over
1000 shards) and grows as ``1/sqrt(r)``: below tens of GB/s of ingest the
lag bound (``gc.max_lag_seconds``), not ``T*``, sets the interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

GB = 2**30
"""Bytes in the GB that S3 storage prices are quoted in."""
MONTH_SECONDS = 30 * 86400
LIST_CLASS = frozenset(
    {"ListObjectsV2", "ListObjects", "PutObject", "CopyObject", "PostObject", "UploadPart"}
)
"""Operations S3 bills at the PUT/COPY/POST/LIST price."""
DELETE_CLASS = frozenset({"DeleteObjects", "DeleteObject"})


@dataclass(frozen=True)
class Prices:
    """Request and storage prices in dollars (``[cost]``).

    Example::

        Prices().request_cost({"ListObjectsV2": 1000})  # -> 0.005

    Attributes:
        list_per_1000: LIST, PUT, COPY, POST requests, per 1000.
        delete_per_1000: DeleteObjects / DeleteObject requests, per 1000.
        get_per_1000: GET, HEAD and every other request, per 1000.
        storage_per_gb_month: storage, per GB (2^30 bytes) per 30 days.
    """

    list_per_1000: float = 0.005
    delete_per_1000: float = 0.0
    get_per_1000: float = 0.0004
    storage_per_gb_month: float = 0.023

    def __post_init__(self) -> None:
        for name in ("list_per_1000", "delete_per_1000", "get_per_1000", "storage_per_gb_month"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")

    def price_of(self, operation: str) -> float:
        """The price of one request of ``operation``."""
        if operation in LIST_CLASS:
            return self.list_per_1000 / 1000
        if operation in DELETE_CLASS:
            return self.delete_per_1000 / 1000
        return self.get_per_1000 / 1000

    def request_cost(self, requests: Mapping[str, int]) -> float:
        """Dollars of ``requests`` (operation -> count)."""
        return sum(self.price_of(op) * n for op, n in requests.items())

    @property
    def storage_per_byte_second(self) -> float:
        return self.storage_per_gb_month / GB / MONTH_SECONDS

    def as_dict(self) -> dict[str, float]:
        """The prices as a run summary carries them."""
        return {
            "list_per_1000": self.list_per_1000,
            "delete_per_1000": self.delete_per_1000,
            "get_per_1000": self.get_per_1000,
            "storage_per_gb_month": self.storage_per_gb_month,
        }


def economic_interval_seconds(bytes_per_second: float, prices: Prices) -> float:
    """``T* = sqrt(2 L / (s r))`` (module docstring): the listing interval
    that minimises LIST cost plus the storage of eligible bytes waiting.
    ``inf`` when nothing arrives or storage is free; 0 when LISTs are free.
    """
    listing = prices.list_per_1000 / 1000
    storage = prices.storage_per_byte_second * bytes_per_second
    if storage <= 0:
        return math.inf
    return math.sqrt(2 * listing / storage)


def cost_per_gb(dollars: float, bytes_reclaimed: int) -> float | None:
    """Dollars per GB reclaimed, or ``None`` when nothing was."""
    if bytes_reclaimed <= 0:
        return None
    return dollars / (bytes_reclaimed / GB)
