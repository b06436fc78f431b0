"""Retry classification and backoff arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.storage.retry import RetryPolicy, is_retryable


@given(
    st.integers(1, 50),
    st.floats(0, 1, exclude_max=True),
    st.floats(0.001, 1.0),
    st.floats(1.0, 30.0),
)
def test_backoff_is_full_jitter_under_an_exponential_cap(
    attempt: int, r: float, base: float, cap: float
) -> None:
    policy = RetryPolicy(max_attempts=60, base_delay_seconds=base, max_delay_seconds=cap)
    delay = policy.backoff_seconds(attempt, r)
    assert 0 <= delay <= min(cap, base * 2 ** (attempt - 1)) + 1e-12
    assert delay == pytest.approx(r * min(cap, base * 2 ** (attempt - 1)))


def test_attempts_are_bounded() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [policy.can_retry(a) for a in (1, 2, 3, 4)] == [True, True, False, False]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"base_delay_seconds": -1},
        {"base_delay_seconds": 2, "max_delay_seconds": 1},
    ],
)
def test_bad_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("SlowDown", 503, True),
        ("InternalError", 500, True),
        (None, 502, True),
        ("RequestTimeout", 400, True),
        ("AccessDenied", 403, False),
        ("PreconditionFailed", 412, False),
        ("NoSuchKey", 404, False),
        (None, None, False),
    ],
)
def test_retryable_classification(code: str | None, status: int | None, expected: bool) -> None:
    assert is_retryable(code, status) is expected
