"""Which S3 failures are worth retrying, and how long to wait. Pure.

epochgc owns exactly one retry layer for S3 requests (botocore's own retries
are switched off in ``storage.client``), so that attempts, SlowDowns and
backoff are visible to request accounting and metrics, and so that tests can
drive the clock. Backoff is full jitter: uncoordinated clients (many
sweepers, many reconcilers) hammering one prefix spread out best that way.
"""

from __future__ import annotations

from dataclasses import dataclass

RETRYABLE_ERROR_CODES = frozenset(
    {
        "SlowDown",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeoutException",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "BandwidthLimitExceeded",
        "OperationAborted",
        "500",
        "502",
        "503",
        "504",
    }
)
"""Error codes (whole-request or per-key in DeleteObjects) that mean "not
applied, try again later"."""

THROTTLING_ERROR_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestThrottled", "503"}
)
"""The subset that asks the client to lower its request rate."""

RETRYABLE_HTTP_STATUSES = frozenset({500, 502, 503, 504})

BUCKET_MISSING_CODES = frozenset({"NoSuchBucket"})
"""The bucket is not there: permanent, and never a missing key."""

ACCESS_DENIED_CODES = frozenset({"AccessDenied", "AllAccessDisabled", "AccountProblem", "403"})
"""Valid credentials, request not allowed: permanent (IAM or bucket policy)."""

CREDENTIALS_ERROR_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "InvalidSecurity",
    }
)
"""The store refused the credentials themselves: permanent until the
credential source is fixed."""


def is_retryable(code: str | None, http_status: int | None) -> bool:
    """Whether an S3 error is transient."""
    if code is not None and code in RETRYABLE_ERROR_CODES:
        return True
    return http_status is not None and http_status in RETRYABLE_HTTP_STATUSES


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with full-jitter exponential backoff.

    Attributes:
        max_attempts: total attempts including the first (>= 1). Higher
            values ride out longer outages but hold a sweep longer.
        base_delay_seconds: the backoff cap of the first retry.
        max_delay_seconds: no single wait is longer than this.
    """

    max_attempts: int = 6
    base_delay_seconds: float = 0.05
    max_delay_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay_seconds < 0 or self.max_delay_seconds < 0:
            raise ValueError("backoff delays must be >= 0")
        if self.base_delay_seconds > self.max_delay_seconds:
            raise ValueError("base_delay_seconds must not exceed max_delay_seconds")

    def can_retry(self, attempt: int) -> bool:
        """Whether attempt number ``attempt`` (1-based) may be followed by another."""
        return attempt < self.max_attempts

    def backoff_seconds(self, attempt: int, unit_random: float) -> float:
        """Wait after failed attempt ``attempt`` (1-based), given a uniform
        random number in [0, 1)."""
        cap = min(self.max_delay_seconds, self.base_delay_seconds * (2 ** (attempt - 1)))
        return float(cap * unit_random)
