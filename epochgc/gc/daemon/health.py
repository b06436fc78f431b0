"""Is the GC daemon healthy? The pure decision behind ``/healthz``.

A daemon that answers HTTP is not necessarily doing its job: it may be
unable to reach its bucket (gone, wrong credentials, network down), or be
the leader while its lease renewals fail, and a liveness probe or a load
balancer must see that. The daemon records the outcome of each kind of
store contact (control poll, lease attempt or renewal, reports read, round)
on its monotonic clock; ``assess_health`` turns those samples and ``now``
into the reasons it is unhealthy (none: healthy), and ``health_payload``
into the ``/healthz`` answer.

Why one entry per kind of contact rather than one "last success": a store
error some paths still read as "nothing written yet" must not hide behind
another path's success. Any kind failing for ``unreachable_after_seconds``
makes the daemon unhealthy, named with its last error.

Invariants: no I/O, no clock; ``now`` and every time in a sample are
seconds of one monotonic clock. Imports nothing outside the standard
library.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime


@dataclass(frozen=True)
class Contact:
    """The latest outcomes of one kind of store contact.

    Example::

        c = record_failure(Contact(), now=10.0, error="connection refused")
        c.failing_since    # 10.0
        record_ok(c, now=12.0).failing_since   # None
    """

    last_ok_at: float | None = None
    failing_since: float | None = None
    """When the current run of failures began; ``None`` while the latest
    attempt succeeded."""
    last_error: str = ""


def record_ok(contact: Contact, now: float) -> Contact:
    """``contact`` after a successful attempt at ``now``."""
    return Contact(last_ok_at=now)


def record_failure(contact: Contact, now: float, error: str) -> Contact:
    """``contact`` after a failed attempt at ``now`` (``error``: one line)."""
    since = contact.failing_since if contact.failing_since is not None else now
    return replace(contact, failing_since=since, last_error=_one_line(error))


@dataclass(frozen=True)
class HealthPolicy:
    """When a failure becomes unhealthy.

    Attributes:
        unreachable_after_seconds: how long one kind of store contact may
            keep failing before the daemon is unhealthy. The daemon uses its
            lease TTL: a daemon that cannot reach the store for that long
            could not hold a lease either, and shorter blips (a retried
            5xx) must not flap a liveness probe.
        renewal_grace_seconds: how long a leader's lease renewals may fail
            before it is unhealthy (less than the TTL: it is about to lose
            the lease mid-round).
    """

    unreachable_after_seconds: float = 15.0
    renewal_grace_seconds: float = 5.0


@dataclass(frozen=True)
class HealthSample:
    """What the daemon knows about itself at one moment.

    Attributes:
        state: the collector state (``running``, ``paused``, ...).
        blocked_reason: why it is ``safety_blocked`` (empty otherwise).
        scheduler_running: the job scheduler is alive.
        leader: this daemon holds the ``gc`` lease.
        contacts: per kind of store contact (``control``, ``lease``,
            ``reports``, ``round``, ``renewal``, ``ticker``).
        holder: this daemon's lease holder name.
        ticker: this daemon holds the ``ticker`` lease.
        safe_epoch: the ``M`` it last computed (``None``: none yet).
        last_outcome: the outcome of its last round (``None``: none yet).
        last_success_at: when its last successful round finished.
        next_round_at: when its next round is due.
    """

    state: str
    blocked_reason: str = ""
    scheduler_running: bool = True
    leader: bool = False
    contacts: Mapping[str, Contact] = field(default_factory=dict)
    holder: str = ""
    ticker: bool = False
    safe_epoch: int | None = None
    last_outcome: str | None = None
    last_success_at: datetime | None = None
    next_round_at: datetime | None = None


RENEWAL = "renewal"
"""The contact kind of the leader's ``gc`` lease renewals."""


def assess_health(sample: HealthSample, now: float, policy: HealthPolicy) -> list[str]:
    """Why the daemon is unhealthy, most important first; empty: healthy.

    Args:
        sample: the daemon's state and store contacts.
        now: the monotonic time the sample's times are measured on.
        policy: the thresholds.
    """
    reasons: list[str] = []
    if sample.state == "safety_blocked":
        reasons.append(f"safety_blocked: {sample.blocked_reason or 'see the daemon log'}")
    elif sample.state == "stopped":
        reasons.append("stopped")
    if not sample.scheduler_running and sample.state not in ("stopping", "stopped"):
        reasons.append("the job scheduler is not running")
    renewal = sample.contacts.get(RENEWAL)
    if (
        sample.leader
        and renewal is not None
        and renewal.failing_since is not None
        and now - renewal.failing_since >= policy.renewal_grace_seconds
    ):
        reasons.append(
            f"gc lease renewal failing for {now - renewal.failing_since:.0f}s: {renewal.last_error}"
        )
    failing = sorted(
        (
            (now - c.failing_since, kind, c)
            for kind, c in sample.contacts.items()
            if kind != RENEWAL and c.failing_since is not None
        ),
        key=lambda item: -item[0],
    )
    for seconds, kind, contact in failing:
        if seconds >= policy.unreachable_after_seconds:
            reasons.append(f"store unreachable for {seconds:.0f}s ({kind}): {contact.last_error}")
    return reasons


def health_payload(
    sample: HealthSample, now: float, policy: HealthPolicy
) -> tuple[bool, dict[str, object]]:
    """The ``/healthz`` answer: healthy, and the details (the reasons, most
    important first, then what the daemon knows about itself and how long
    ago each kind of store contact succeeded or since when it fails).

    Args:
        sample: the daemon's state and store contacts.
        now: the monotonic time the sample's times are measured on.
        policy: the thresholds.
    """
    reasons = assess_health(sample, now, policy)
    details: dict[str, object] = {
        "reason": reasons[0] if reasons else None,
        "reasons": reasons,
        "state": sample.state,
        "leader": sample.leader,
        "holder": sample.holder,
        "ticker": sample.ticker,
        "safe_epoch": sample.safe_epoch,
        "last_outcome": sample.last_outcome,
        "last_success_at": sample.last_success_at,
        "next_round_at": sample.next_round_at,
        "store": {
            kind: {
                "ok_seconds_ago": None if c.last_ok_at is None else round(now - c.last_ok_at, 1),
                "failing_for_seconds": None
                if c.failing_since is None
                else round(now - c.failing_since, 1),
                "last_error": c.last_error or None,
            }
            for kind, c in sorted(sample.contacts.items())
        },
    }
    return not reasons, details


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:297] + "..."
