"""The pure health decision behind ``/healthz``."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.daemon.health import (
    RENEWAL,
    Contact,
    HealthPolicy,
    HealthSample,
    assess_health,
    health_payload,
    record_failure,
    record_ok,
)

POLICY = HealthPolicy(unreachable_after_seconds=15.0, renewal_grace_seconds=5.0)


def failing(since: float, error: str = "connection refused") -> Contact:
    return record_failure(Contact(last_ok_at=0.0), since, error)


def test_a_running_daemon_with_fresh_contacts_is_healthy() -> None:
    sample = HealthSample("running", leader=True, contacts={"control": record_ok(Contact(), 99.0)})
    assert assess_health(sample, 100.0, POLICY) == []


def test_a_store_failing_for_longer_than_the_threshold_is_named_with_its_cause() -> None:
    sample = HealthSample("running", contacts={"reports": failing(58.0, "NoSuchBucket: t-1")})
    assert assess_health(sample, 72.0, POLICY) == []
    assert assess_health(sample, 100.0, POLICY) == [
        "store unreachable for 42s (reports): NoSuchBucket: t-1"
    ]


def test_one_failing_contact_is_not_hidden_by_another_succeeding() -> None:
    sample = HealthSample(
        "running",
        contacts={"control": record_ok(Contact(), 99.0), "reports": failing(10.0)},
    )
    assert assess_health(sample, 100.0, POLICY) == [
        "store unreachable for 90s (reports): connection refused"
    ]


def test_failures_keep_the_start_of_their_run_and_a_success_ends_it() -> None:
    c = record_failure(Contact(), 10.0, "first")
    c = record_failure(c, 20.0, "second\nline")
    assert (c.failing_since, c.last_error) == (10.0, "second line")
    assert record_ok(c, 30.0) == Contact(last_ok_at=30.0)


def test_a_leader_whose_renewals_fail_is_unhealthy_a_standby_is_not() -> None:
    contacts = {RENEWAL: failing(90.0, "renewal failed")}
    leader = HealthSample("running", leader=True, contacts=contacts)
    assert assess_health(leader, 93.0, POLICY) == []
    assert assess_health(leader, 96.0, POLICY) == [
        "gc lease renewal failing for 6s: renewal failed"
    ]
    standby = HealthSample("running", leader=False, contacts=contacts)
    assert assess_health(standby, 96.0, POLICY) == []


def test_safety_blocked_stopped_and_a_dead_scheduler_are_unhealthy() -> None:
    blocked = HealthSample("safety_blocked", blocked_reason="entry 4 unreadable")
    assert assess_health(blocked, 0.0, POLICY) == ["safety_blocked: entry 4 unreadable"]
    assert assess_health(HealthSample("stopped", scheduler_running=False), 0.0, POLICY) == [
        "stopped"
    ]
    dead = HealthSample("running", scheduler_running=False)
    assert assess_health(dead, 0.0, POLICY) == ["the job scheduler is not running"]
    assert assess_health(HealthSample("paused"), 0.0, POLICY) == []


@given(
    st.dictionaries(
        st.sampled_from(["control", "lease", "reports", "round"]),
        st.tuples(st.floats(0, 1000), st.booleans()),
    ),
)
def test_unhealthy_exactly_when_some_contact_failed_for_the_threshold(
    outcomes: dict[str, tuple[float, bool]],
) -> None:
    now = 2000.0
    contacts = {
        kind: (record_failure(Contact(), at, "x") if failed else record_ok(Contact(), at))
        for kind, (at, failed) in outcomes.items()
    }
    sample = HealthSample("running", contacts=contacts)
    expected = any(failed and now - at >= 15.0 for at, failed in outcomes.values())
    assert bool(assess_health(sample, now, POLICY)) is expected
    assert len(assess_health(sample, now, POLICY)) <= len(outcomes)


def test_the_healthz_payload_names_the_first_reason_and_each_contact_by_kind() -> None:
    at = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
    sample = HealthSample(
        "running",
        leader=True,
        contacts={"round": record_ok(Contact(), 90.0), "reports": failing(60.0, "NoSuchBucket")},
        holder="gc-a/3f2a",
        ticker=True,
        safe_epoch=41,
        last_outcome="idle",
        last_success_at=at,
        next_round_at=at,
    )
    healthy, details = health_payload(sample, 100.0, POLICY)
    assert not healthy
    assert details == {
        "reason": "store unreachable for 40s (reports): NoSuchBucket",
        "reasons": ["store unreachable for 40s (reports): NoSuchBucket"],
        "state": "running",
        "leader": True,
        "holder": "gc-a/3f2a",
        "ticker": True,
        "safe_epoch": 41,
        "last_outcome": "idle",
        "last_success_at": at,
        "next_round_at": at,
        "store": {
            "reports": {
                "ok_seconds_ago": 100.0,
                "failing_for_seconds": 40.0,
                "last_error": "NoSuchBucket",
            },
            "round": {"ok_seconds_ago": 10.0, "failing_for_seconds": None, "last_error": None},
        },
    }


def test_a_healthy_payload_has_no_reason() -> None:
    healthy, details = health_payload(HealthSample("paused"), 5.0, POLICY)
    assert healthy and details["reason"] is None and details["reasons"] == []
    assert details["store"] == {} and details["safe_epoch"] is None
