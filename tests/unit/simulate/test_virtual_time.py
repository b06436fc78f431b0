"""The simulation's scheduler: virtual time, seeded order, locks, pools,
kill and pause."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.simulate.virtual_time import Process, Scheduler


def test_tasks_sleep_in_virtual_time_in_order() -> None:
    sched = Scheduler(random.Random(1))
    seen: list[tuple[float, str]] = []
    proc = Process("p")

    def task(name: str, pause: float) -> None:
        for _ in range(3):
            sched.sleep(pause)
            seen.append((sched.now, name))

    sched.spawn(proc, "a", lambda: task("a", 1.0))
    sched.spawn(proc, "b", lambda: task("b", 1.5))
    sched.run_until(10.0)
    # a and b are both due at 3.0: their order there is the seed's.
    assert sorted(seen) == [(1.0, "a"), (1.5, "b"), (2.0, "a"), (3.0, "a"), (3.0, "b"), (4.5, "b")]
    assert [t for t, _ in seen] == sorted(t for t, _ in seen)
    assert sched.now == 10.0


@given(st.integers(0, 2**32 - 1))
@settings(max_examples=30, deadline=None)
def test_one_seed_one_order(seed: int) -> None:
    def order(seed: int) -> list[str]:
        sched = Scheduler(random.Random(seed))
        seen: list[str] = []
        proc = Process("p")
        for name in "abcdef":
            sched.spawn(proc, name, lambda n=name: seen.append(n))  # type: ignore[misc]
        sched.run_until(1.0)
        return seen

    assert order(seed) == order(seed)
    assert sorted(order(seed)) == list("abcdef")


def test_work_due_at_one_instant_runs_in_orders_that_differ_between_seeds() -> None:
    def order(seed: int) -> str:
        sched = Scheduler(random.Random(seed))
        seen: list[str] = []
        for name in "abcdef":
            sched.spawn(Process(name), name, lambda n=name: seen.append(n))  # type: ignore[misc]
        sched.run_until(1.0)
        return "".join(seen)

    assert len({order(seed) for seed in range(20)}) > 1


def test_a_lock_excludes_another_task_and_is_reentrant() -> None:
    sched = Scheduler(random.Random(2))
    lock = sched.lock()
    events: list[str] = []

    def holder() -> None:
        with lock, lock:
            events.append(f"{sched.now:g} holder in")
            sched.sleep(5.0)
            events.append(f"{sched.now:g} holder out")

    def waiter() -> None:
        sched.sleep(1.0)
        with lock:
            events.append(f"{sched.now:g} waiter in")

    proc = Process("p")
    sched.spawn(proc, "holder", holder)
    sched.spawn(proc, "waiter", waiter)
    sched.run_until(10.0)
    assert events == ["0 holder in", "5 holder out", "5 waiter in"]


def test_a_lock_wait_gives_up_after_its_timeout_in_virtual_time() -> None:
    sched = Scheduler(random.Random(3))
    lock = sched.lock()
    got: list[tuple[float, bool]] = []

    def holder() -> None:
        with lock:
            sched.sleep(10.0)

    def waiter() -> None:
        sched.sleep(1.0)
        ok = lock.acquire(timeout=2.0)
        got.append((sched.now, ok))
        sched.sleep(20.0)  # a stale deadline wake-up must not cut this short
        got.append((sched.now, True))

    proc = Process("p")
    sched.spawn(proc, "holder", holder)
    sched.spawn(proc, "waiter", waiter)
    sched.run_until(30.0)
    assert got == [(3.0, False), (23.0, True)]


def test_a_pool_runs_side_by_side_and_hands_results_back_in_order() -> None:
    sched = Scheduler(random.Random(4))
    pool = sched.pool(4, "pool")
    assert pool is not None
    out: list[object] = []

    def slow(n: int) -> int:
        sched.sleep(1.0)
        return n * n

    def caller() -> None:
        out.extend(pool.map(slow, range(8)))
        out.append(sched.now)

    sched.spawn(Process("p"), "caller", caller)
    sched.run_until(10.0)
    assert out == [0, 1, 4, 9, 16, 25, 36, 49, 2.0]  # 8 requests, 4 at once


def test_a_pool_raises_the_first_failure_when_its_result_is_reached() -> None:
    sched = Scheduler(random.Random(5))
    pool = sched.pool(2, "pool")
    assert pool is not None
    raised: list[str] = []

    def fail_odd(n: int) -> int:
        if n % 2:
            raise ValueError(f"odd {n}")
        return n

    def caller() -> None:
        try:
            list(pool.map(fail_odd, range(4)))
        except ValueError as err:
            raised.append(str(err))

    sched.spawn(Process("p"), "caller", caller)
    sched.run_until(1.0)
    assert raised == ["odd 1"]


def test_a_killed_process_runs_no_more_and_releases_its_locks() -> None:
    sched = Scheduler(random.Random(6))
    lock = sched.lock()
    victim = Process("victim")
    steps: list[float] = []
    got: list[float] = []

    def holder() -> None:
        with lock:
            while True:
                sched.sleep(1.0)
                steps.append(sched.now)

    def other() -> None:
        sched.sleep(0.5)
        with lock:
            got.append(sched.now)

    sched.spawn(victim, "holder", holder)
    sched.spawn(Process("other"), "other", other)
    sched.at(3.5, lambda: sched.kill(victim))
    sched.run_until(10.0)
    assert steps == [1.0, 2.0, 3.0]
    assert got == [3.5]


def test_a_paused_process_resumes_at_the_pause_end() -> None:
    sched = Scheduler(random.Random(7))
    proc = Process("p")
    ticks: list[float] = []

    def ticker() -> None:
        while True:
            sched.sleep(1.0)
            ticks.append(sched.now)

    sched.spawn(proc, "ticker", ticker)
    sched.at(2.5, lambda: sched.pause(proc, 4.0))
    sched.run_until(9.0)
    assert ticks == [1.0, 2.0, 6.5, 7.5, 8.5]


def test_the_scheduler_is_not_a_task() -> None:
    sched = Scheduler(random.Random(8))
    with pytest.raises(RuntimeError, match="not inside a simulated task"):
        sched.sleep(1.0)


def test_a_condition_wait_releases_the_lock_until_notified() -> None:
    sched = Scheduler(random.Random(3))
    lock = sched.lock()
    cond = sched.condition(lock)
    proc = Process("p")
    seen: list[tuple[float, str]] = []
    ready = {"flag": False}

    def waiter() -> None:
        with lock, lock:  # re-entrant: wait gives the lock up whole
            while not ready["flag"]:
                cond.wait()
            seen.append((sched.now, "woke"))

    def notifier() -> None:
        sched.sleep(2.0)
        with lock:  # would wait forever if the waiter still held it
            ready["flag"] = True
            cond.notify_all()
            seen.append((sched.now, "notified"))

    sched.spawn(proc, "waiter", waiter)
    sched.spawn(proc, "notifier", notifier)
    sched.run_until(5.0)
    assert seen == [(2.0, "notified"), (2.0, "woke")]


def test_a_condition_wait_times_out_in_virtual_time() -> None:
    sched = Scheduler(random.Random(4))
    lock = sched.lock()
    cond = sched.condition(lock)
    results: list[tuple[float, bool]] = []

    def waiter() -> None:
        with lock:
            notified = cond.wait(1.5)
            results.append((sched.now, notified))

    sched.spawn(Process("p"), "waiter", waiter)
    sched.run_until(5.0)
    assert results == [(1.5, False)]


def test_a_future_result_waits_in_virtual_time_and_can_time_out() -> None:
    sched = Scheduler(random.Random(5))
    future = sched.future()
    results: list[tuple[float, object]] = []

    def reader() -> None:
        try:
            sched.sleep(0.0)
            future.result(timeout=0.5)
        except TimeoutError:
            results.append((sched.now, "timeout"))
        value = future.result()
        results.append((sched.now, value))

    def resolver() -> None:
        sched.sleep(3.0)
        future.set_result(42)

    sched.spawn(Process("a"), "reader", reader)
    sched.spawn(Process("b"), "resolver", resolver)
    sched.run_until(5.0)
    assert results == [(0.5, "timeout"), (3.0, 42)]


def test_an_executor_runs_calls_on_at_most_its_workers_and_shutdown_waits() -> None:
    sched = Scheduler(random.Random(6))
    owner = Process("node")
    running = {"now": 0, "most": 0}
    finished: list[float] = []

    def call(n: int) -> int:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        sched.sleep(1.0)
        running["now"] -= 1
        return n * 2

    def submitter() -> None:
        pool = sched.executor(owner, 2, "puts")
        futures = [pool.submit(call, n) for n in range(5)]
        pool.shutdown(wait=True)
        finished.append(sched.now)
        assert [f.result() for f in futures] == [0, 2, 4, 6, 8]

    sched.spawn(owner, "submitter", submitter)
    sched.run_until(10.0)
    assert running["most"] == 2
    assert finished == [3.0]  # five one-second calls on two workers


def test_an_executors_calls_die_with_its_process_not_the_submitters() -> None:
    sched = Scheduler(random.Random(7))
    node, producer = Process("node"), Process("producer")
    pool = sched.executor(node, 1, "puts")
    outcome: list[str] = []

    def submit_and_wait() -> None:
        future = pool.submit(sched.sleep, 5.0)
        try:
            future.result(timeout=10.0)
            outcome.append("done")
        except TimeoutError:
            outcome.append(f"timed out at {sched.now}")

    sched.spawn(producer, "produce", submit_and_wait)
    sched.at(1.0, lambda: sched.kill(node))
    sched.run_until(20.0)
    assert outcome == ["timed out at 10.0"]
