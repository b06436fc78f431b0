"""When the next GC round comes (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.collector import RoundOutcome, ScheduleSettings, next_round_delay

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
SCHEDULE = ScheduleSettings(
    interval=timedelta(seconds=60),
    after_progress=timedelta(seconds=1),
    after_failure=timedelta(seconds=10),
    epoch_interval=timedelta(seconds=30),
)


def delay(outcome: RoundOutcome, **kwargs: object) -> timedelta:
    args: dict[str, object] = {
        "now": NOW,
        "min_object_age": timedelta(minutes=10),
        "youngest_too_young": None,
        "epoch_started_at": None,
    }
    args.update(kwargs)
    return next_round_delay(outcome, SCHEDULE, **args)  # type: ignore[arg-type]


def test_progress_comes_back_soon_and_failure_backs_off() -> None:
    assert delay(RoundOutcome.COLLECTED) == timedelta(seconds=1)
    assert delay(RoundOutcome.FAILED) == timedelta(seconds=10)


def test_paused_blocked_and_guard_stopped_wait_the_interval() -> None:
    for outcome in (RoundOutcome.PAUSED, RoundOutcome.BLOCKED, RoundOutcome.GUARD_STOPPED):
        assert delay(outcome) == timedelta(seconds=60)


def test_idle_waits_for_the_next_epoch_tick() -> None:
    started = NOW - timedelta(seconds=20)
    assert delay(RoundOutcome.IDLE, epoch_started_at=started) == timedelta(seconds=10)


def test_idle_waits_until_the_youngest_too_young_object_ages_in() -> None:
    youngest = NOW - timedelta(minutes=10) + timedelta(seconds=5)
    assert delay(RoundOutcome.IDLE, youngest_too_young=youngest) == timedelta(seconds=5)


def test_idle_without_hints_waits_the_interval() -> None:
    assert delay(RoundOutcome.IDLE) == timedelta(seconds=60)


@given(
    tick_age=st.floats(min_value=0, max_value=10_000),
    young_age=st.floats(min_value=0, max_value=10_000),
)
def test_idle_delay_is_bounded(tick_age: float, young_age: float) -> None:
    result = delay(
        RoundOutcome.IDLE,
        epoch_started_at=NOW - timedelta(seconds=tick_age),
        youngest_too_young=NOW - timedelta(seconds=young_age),
    )
    assert timedelta(seconds=0.5) <= result <= SCHEDULE.interval


def test_with_the_cost_schedule_rounds_come_when_a_shard_is_due() -> None:
    schedule = ScheduleSettings(interval=timedelta(seconds=60), scheduled_idle=timedelta(minutes=5))
    args: dict[str, object] = {
        "now": NOW,
        "min_object_age": timedelta(0),
        "youngest_too_young": None,
        "epoch_started_at": NOW,
    }
    soon = NOW + timedelta(seconds=90)
    for outcome in (RoundOutcome.COLLECTED, RoundOutcome.IDLE):
        assert next_round_delay(outcome, schedule, next_listing_at=soon, **args) == timedelta(  # type: ignore[arg-type]
            seconds=90
        ), "not a second after progress: the listed shards are not due again soon"
    later = NOW + timedelta(hours=1)
    idle = next_round_delay(RoundOutcome.IDLE, schedule, next_listing_at=later, **args)  # type: ignore[arg-type]
    assert idle == timedelta(minutes=5), "idle rounds keep M and the metrics this fresh"
    failed = next_round_delay(RoundOutcome.FAILED, schedule, next_listing_at=later, **args)  # type: ignore[arg-type]
    assert failed == timedelta(seconds=10)
    assert schedule.longest_wait == timedelta(minutes=5)
