"""The ticker's schedule (pure) and its driver over a fake lease manager
and a fake monotonic clock."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import TransientStorageError
from epochgc.leases.role_leases import LeaseGrant
from epochgc.runtime import Runtime
from epochgc.simulate.memory_store import MemoryStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.ticker import EpochTicker, TickAction, TickSchedule
from tests.support.clocks import SetClock

EPS = 1e-9
times = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
durations = st.floats(min_value=0.001, max_value=1e4, allow_nan=False, allow_infinity=False)


@given(now=times, last=st.none() | times, interval=durations, poll=durations)
def test_never_ticks_without_the_role(
    now: float, last: float | None, interval: float, poll: float
) -> None:
    decision = TickSchedule(interval, poll).decide(now, held_since=None, last_tick_at=last)
    assert decision.action is TickAction.STANDBY
    assert decision.wait_seconds == poll


@given(now=times, held_since=times, last=st.none() | times, interval=durations, poll=durations)
def test_ticks_exactly_when_an_interval_has_passed_since_holding_or_last_tick(
    now: float, held_since: float, last: float | None, interval: float, poll: float
) -> None:
    decision = TickSchedule(interval, poll).decide(now, held_since=held_since, last_tick_at=last)
    since = held_since if last is None else max(held_since, last)
    due = since + interval
    if now >= due:
        assert decision.action is TickAction.TICK and decision.wait_seconds == 0
    else:
        assert decision.action is TickAction.WAIT
        # Never sleeps past the due time, nor longer than a poll.
        assert 0 < decision.wait_seconds <= poll
        assert now + decision.wait_seconds <= due + EPS * max(1.0, due)


def test_a_new_holder_waits_a_whole_interval_whatever_it_did_before() -> None:
    schedule = TickSchedule(interval_seconds=60, poll_seconds=5)
    # Ticked at 10 during an earlier holding, lost the role, took it again at 100.
    assert schedule.decide(100, held_since=100, last_tick_at=10).action is TickAction.WAIT
    assert schedule.next_tick_at(held_since=100, last_tick_at=10) == 160
    assert schedule.decide(160, held_since=100, last_tick_at=10).action is TickAction.TICK


@pytest.mark.parametrize(("interval", "poll"), [(0, 1), (1, 0), (-1, 1), (math.nan, 1)])
def test_schedule_rejects_non_positive_periods(interval: float, poll: float) -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        TickSchedule(interval, poll)


@dataclass(frozen=True)
class Holding:
    """One process holding the role from ``start`` to ``end``."""

    start: float
    end: float


holdings_st = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=50.0),  # gap before the holding
        st.floats(min_value=0.0, max_value=200.0),  # its length
    ),
    min_size=1,
    max_size=8,
)


def simulate(schedule: TickSchedule, holding: Holding, lateness: list[float]) -> list[float]:
    """A driver following the schedule through one holding: it wakes up
    late by the next ``lateness`` value every time (a loaded machine) and
    ticks (instantly) only while it holds the role."""
    ticks: list[float] = []
    now, last, steps = holding.start, None, 0
    while now < holding.end:
        decision = schedule.decide(now, held_since=holding.start, last_tick_at=last)
        if decision.action is TickAction.TICK:
            ticks.append(now)
            last = now
            continue
        now += decision.wait_seconds + lateness[steps % len(lateness)]
        steps += 1
    return ticks


@given(
    holdings=holdings_st,
    interval=st.floats(min_value=0.5, max_value=20.0),
    poll=st.floats(min_value=0.1, max_value=10.0),
    lateness=st.lists(st.floats(min_value=0.0, max_value=2.0), min_size=1, max_size=5),
)
def test_hand_overs_keep_ticks_an_interval_apart_and_holders_keep_ticking(
    holdings: list[tuple[float, float]],
    interval: float,
    poll: float,
    lateness: list[float],
) -> None:
    """Holders follow one another (the lease: the next one starts only
    after the previous one stopped). Across all of them, two ticks are never
    less than an interval apart, so N processes never tick more than once
    per interval; and each holder ticks about once per interval."""
    schedule = TickSchedule(interval, poll)
    at, all_ticks = 0.0, []
    for gap, length in holdings:
        holding = Holding(at + gap, at + gap + length)
        at = holding.end
        ticks = simulate(schedule, holding, lateness)
        assert len(ticks) <= math.floor(length / interval + EPS)
        worst = interval + max(lateness)
        assert len(ticks) >= math.floor(length / worst) - 1
        all_ticks += ticks
    for a, b in itertools.pairwise(all_ticks):
        assert b - a >= interval - EPS * max(1.0, b)


# --- the driver, over a fake lease manager -------------------------------------


class FakeLeases:
    """The part of ``LeaseManager`` the ticker uses: a grant valid until
    ``valid_until`` on the fake clock; acquiring succeeds when ``free``."""

    holder = "me/1"

    def __init__(self, clock: SetClock[float]) -> None:
        self.clock = clock
        self.free = True
        self.term = 0
        self.valid_until: float | None = None
        self.released = 0

    def grant(self, name: str) -> LeaseGrant | None:
        if self.valid_until is None or self.clock() >= self.valid_until:
            return None
        return LeaseGrant(name, self.holder, self.term, None, "etag", self.valid_until)  # type: ignore[arg-type]

    def try_acquire(self, name: str) -> LeaseGrant | None:
        if not self.free:
            return None
        self.term += 1
        self.valid_until = self.clock() + 1000
        return self.grant(name)

    def release(self, _name: str) -> None:
        self.released += 1
        self.valid_until = None


def driver(
    clock: SetClock[float], leases: FakeLeases, tick: object = None
) -> tuple[EpochTicker, list[float]]:
    ticked: list[float] = []

    def default_tick(_still_allowed: Callable[[], None]) -> int:
        ticked.append(clock())
        return len(ticked)

    ticker = EpochTicker(
        leases,  # type: ignore[arg-type]
        tick if callable(tick) else default_tick,  # type: ignore[arg-type]
        interval_seconds=10,
        poll_seconds=2,
        monotonic=clock,
    )
    return ticker, ticked


def run_until(ticker: EpochTicker, clock: SetClock[float], until: float) -> None:
    while clock.at < until:
        clock.at += ticker.run_once()


def test_driver_takes_the_role_then_ticks_once_per_interval() -> None:
    clock = SetClock(0.0)
    leases = FakeLeases(clock)
    ticker, ticked = driver(clock, leases)
    assert ticker.run_once() == 2, "acquired at 0: nothing due, check again in a poll"
    assert ticker.held and ticked == []
    run_until(ticker, clock, 45)
    assert ticked == [10, 20, 30, 40]
    assert ticker.ticks == 4


def test_driver_stands_by_while_another_process_holds_the_role() -> None:
    clock = SetClock(0.0)
    leases = FakeLeases(clock)
    leases.free = False
    ticker, ticked = driver(clock, leases)
    run_until(ticker, clock, 30)
    assert ticked == [] and not ticker.held
    leases.free = True  # the holder released it
    run_until(ticker, clock, 50)
    assert ticked and ticked[0] >= 30 + 10, "a new holder waits one interval"


def test_driver_stops_ticking_once_its_grant_runs_out() -> None:
    clock = SetClock(0.0)
    leases = FakeLeases(clock)
    ticker, ticked = driver(clock, leases)
    ticker.run_once()
    leases.valid_until = 25.0  # heartbeats stopped: the grant ends at 25
    leases.free = False  # and someone else takes the lease
    run_until(ticker, clock, 100)
    assert ticked == [10, 20]
    assert not ticker.held


def test_a_failed_tick_is_retried_one_interval_later() -> None:
    clock = SetClock(0.0)
    leases = FakeLeases(clock)
    calls: list[float] = []

    def flaky(_still_allowed: Callable[[], None]) -> int:
        calls.append(clock())
        if len(calls) == 1:
            raise TransientStorageError("lost answer")
        return len(calls)

    ticker, _ = driver(clock, leases, flaky)
    run_until(ticker, clock, 25)
    assert calls == [10, 20]
    assert (ticker.ticks, ticker.failures) == (1, 1)


def test_stop_releases_the_role_only_if_held() -> None:
    clock = SetClock(0.0)
    standby_leases = FakeLeases(clock)
    standby_leases.free = False
    standby, _ = driver(clock, standby_leases)
    standby.run_once()
    standby.stop()
    assert standby_leases.released == 0
    leases = FakeLeases(clock)
    ticker, _ = driver(clock, leases)
    ticker.run_once()
    ticker.stop()
    ticker.stop()  # idempotent
    assert leases.released == 1
    assert ticker.run_once() == 2 and not ticker.held, "a stopped ticker takes no role"


class _PausedBeforeThePut(MemoryStore):
    """The bucket, where the ticker's first PUT of a controller entry is
    held back (the process was paused after listing the tail): meanwhile
    ``meanwhile`` runs (the role changes hands, the new holder ticks)."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        super().__init__()
        self._meanwhile: Callable[[], None] | None = meanwhile

    def put_if_absent(
        self, key: str, body: bytes, *, metadata: Mapping[str, str] | None = None
    ) -> str:
        if self._meanwhile is not None and "/meta/controller/" in key:
            meanwhile, self._meanwhile = self._meanwhile, None
            meanwhile()
        return super().put_if_absent(key, body, metadata=metadata)


def test_a_tick_that_lost_its_slot_is_not_retried_once_the_role_has_run_out() -> None:
    """Found by ``epochgc simulate`` (seed 41): a holder paused between
    listing the controller log's tail and writing its tick woke after its
    grant had ended; its write lost the slot to the new holder's tick, and
    the retry appended at the next slot: two ticks 1.2 s apart."""
    clock = SetClock(0.0)
    leases = FakeLeases(clock)

    def paused_past_the_grant_and_deposed() -> None:
        assert leases.valid_until is not None
        clock.at = leases.valid_until + 30.0
        Controller(store, "epochgc").tick()  # the new holder's first tick

    store = _PausedBeforeThePut(paused_past_the_grant_and_deposed)
    runtime = Runtime(monotonic=clock, sleep=lambda seconds: None)
    ticker = EpochTicker(
        leases,
        Controller(store, "epochgc", runtime=runtime).tick,
        interval_seconds=10,
        poll_seconds=2,
        monotonic=clock,
    )
    ticker.run_once()  # takes the role at 0
    clock.at = 10.0
    ticker.run_once()  # due: lists the tail, then the pause
    ticks = [key for key in (o.key for o in store.list_objects("epochgc/meta/controller/"))]
    assert len(ticks) == 1, f"the deposed holder's retry wrote a second tick: {ticks}"
    assert (ticker.ticks, ticker.failures) == (0, 1)
