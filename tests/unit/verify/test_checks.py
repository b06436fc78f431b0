"""Verify's own checks: what a collector may delete besides L0 keys."""

from __future__ import annotations

import uuid

import pytest

from epochgc.verify.checks import tidied_incarnation


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("epochgc/meta/controller/00000000000000000007", True),
        ("epochgc/meta/reports/node-1", True),
        ("epochgc/gc/runs/r/summary.json", True),
        ("epochgc/gc/daemons/gc-1", True),
        ("epochgc/gc/status.json", False),
        ("epochgc/meta/partitions/churn/12/1/snapshot", ("churn", 12)),
        (f"epochgc/l1/churn/12/1/{0:020d}-{3:020d}-{uuid.UUID(int=1)}", ("churn", 12)),
        ("epochgc/meta/leases/partition.a.b.12.1", ("a.b", 12)),
        ("epochgc/meta/leases/gc", False),
        ("epochgc/meta/layout.json", False),
        ("other/l1/x", False),
    ],
)
def test_verify_knows_what_a_collector_may_tidy(key: str, expected: object) -> None:
    assert tidied_incarnation(key) == expected
