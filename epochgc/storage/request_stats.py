"""Counting every S3 request by operation and outcome.

Hooks into botocore's ``response-received`` event, which fires once per HTTP
attempt (including failed ones and those answered by a test's injected
response), so the counts are what S3 would bill and what a rate limit sees.
Benchmarks report requests per object from it; metrics read it at scrape time.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any


class RequestStats:
    """Thread-safe request counters for one or more boto3 clients.

    Example::

        stats = RequestStats()
        stats.attach(client)
        client.list_objects_v2(Bucket="b")
        stats.by_operation()["ListObjectsV2"]  # -> 1
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_operation: Counter[str] = Counter()
        self._by_outcome: Counter[tuple[str, str]] = Counter()

    def attach(self, client: Any) -> None:
        """Register on ``client``'s event system (any boto3 S3 client)."""
        client.meta.events.register("response-received.s3.*", self._on_response)

    def _on_response(self, event_name: str = "", **kwargs: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        outcome = _outcome_of(kwargs.get("response_dict"), kwargs.get("exception"))
        with self._lock:
            self._by_operation[operation] += 1
            self._by_outcome[(operation, outcome)] += 1

    def by_operation(self) -> dict[str, int]:
        """Requests per operation name (``PutObject``, ``DeleteObjects``...)."""
        with self._lock:
            return dict(self._by_operation)

    def by_outcome(self) -> dict[tuple[str, str], int]:
        """Requests per (operation, outcome); outcome is the HTTP status as
        text or ``error`` when no response arrived."""
        with self._lock:
            return dict(self._by_outcome)

    def total(self) -> int:
        """All requests counted so far."""
        with self._lock:
            return sum(self._by_operation.values())

    def reset(self) -> None:
        """Zero every counter (benchmarks reset between contenders)."""
        with self._lock:
            self._by_operation.clear()
            self._by_outcome.clear()


def _outcome_of(response_dict: Mapping[str, Any] | None, exception: object) -> str:
    if response_dict is not None and "status_code" in response_dict:
        return str(response_dict["status_code"])
    return "error" if exception is not None else "unknown"
