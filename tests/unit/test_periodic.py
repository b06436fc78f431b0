"""``PeriodicThread`` runs on its runtime's worker and condition: every
interval in (here virtual) time, and ``stop`` ends it at once, after the
call in progress."""

from __future__ import annotations

import random

import pytest

from epochgc.periodic import PeriodicThread
from epochgc.runtime import Runtime
from epochgc.simulate.virtual_time import Process, Scheduler


def simulated() -> tuple[Scheduler, Process, Runtime]:
    sched = Scheduler(random.Random(7))
    proc = Process("p")
    runtime = Runtime(
        monotonic=lambda: sched.now,
        sleep=sched.sleep,
        lock=sched.lock,
        condition=sched.condition,  # type: ignore[arg-type]
        spawn=lambda name, fn: sched.spawn(proc, name, fn),
    )
    return sched, proc, runtime


@pytest.mark.parametrize(
    ("stop_at", "returns_at", "expected"),
    [(6.2, 6.2, [2.0, 4.5]), (4.7, 5.0, [2.0, 4.5])],
    ids=["between calls", "during a call"],
)
def test_calls_come_every_interval_until_stopped_and_stop_waits_for_the_call(
    stop_at: float, returns_at: float, expected: list[float]
) -> None:
    sched, proc, runtime = simulated()
    calls: list[float] = []

    def slow_call() -> None:
        calls.append(sched.now)
        sched.sleep(0.5)  # the call in progress when stop comes

    loop = PeriodicThread("beat", 2.0, slow_call, runtime=runtime)
    stopped: list[float] = []

    def stopper() -> None:
        loop.start()
        assert loop.running
        sched.sleep(stop_at)
        loop.stop()
        stopped.append(sched.now)
        assert not loop.running

    sched.spawn(proc, "stopper", stopper)
    sched.run_until(20.0)
    assert calls == expected
    assert stopped == [returns_at], "stop wakes the wait; a call in progress finishes first"


def test_a_call_that_raises_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sched, proc, runtime = simulated()
    calls: list[float] = []

    def failing() -> None:
        calls.append(sched.now)
        raise RuntimeError("boom")

    loop = PeriodicThread("beat", 1.0, failing, runtime=runtime)
    sched.spawn(proc, "start", loop.start)
    sched.run_until(3.5)
    assert calls == [1.0, 2.0, 3.0]
    assert "periodic call failed" in caplog.text


def test_start_twice_is_refused_and_stop_without_start_returns() -> None:
    sched, proc, runtime = simulated()
    loop = PeriodicThread("beat", 1.0, lambda: None, runtime=runtime)
    outcome: list[str] = []

    def twice() -> None:
        loop.stop()  # never started: returns at once
        loop.start()
        with pytest.raises(RuntimeError, match="already running"):
            loop.start()
        loop.stop()
        outcome.append("ok")

    sched.spawn(proc, "twice", twice)
    sched.run_until(5.0)
    assert outcome == ["ok"]
