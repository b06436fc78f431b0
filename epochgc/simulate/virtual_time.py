"""Virtual time and a seeded scheduler: many simulated processes' code in
one thread, replayable from one seed.

Each simulated activity (a node's lease heartbeat, its ownership rounds,
its leading loop, one request of a round's pool) is a *task*: a greenlet
running the product's own synchronous code. A task runs until it waits
(``sleep``, a lock held by another task, a store request in flight); it
then switches back to the scheduler, which wakes the next task due. Work
due at the same virtual instant runs in an order drawn from the seed, so
the interleavings differ from seed to seed and repeat exactly for one.

Why greenlets and not threads or asyncio: the protocol code is ordinary
blocking code that a production thread runs; a greenlet can suspend it in
the middle of a store call and let a peer act meanwhile, in one thread,
with no change to that code. A real thread would run outside the virtual
clock; asyncio would need the code rewritten as coroutines.

A task belongs to a *process*. Killing a process (a kill -9) ends every
task of it at once (``ProcessKilled`` is thrown into it; it is a
``BaseException`` so that no ``except Exception`` of product code swallows
it), and pausing one (a SIGSTOP, a long garbage-collection pause) defers
every wake-up of its tasks to the pause's end.
"""

from __future__ import annotations

import collections
import heapq
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import greenlet

from epochgc.runtime import Future

T = TypeVar("T")


class ProcessKilled(BaseException):
    """Thrown into every task of a killed process: unwinds it at once."""


@dataclass(eq=False)
class Process:
    """A simulated OS process: its tasks share its fate."""

    name: str
    alive: bool = True
    paused_until: float = 0.0
    tasks: set[Task] = field(default_factory=set)


@dataclass(eq=False)
class Task:
    """One greenlet of a process."""

    name: str
    process: Process
    glet: greenlet.greenlet
    done: bool = False
    wait_id: int = 0
    """Which wait of this task a wake-up is for: a wake-up scheduled for
    an earlier wait (a lock's deadline after the lock was had) is stale."""


class Scheduler:
    """The virtual clock and the run queue.

    Example::

        sched = Scheduler(random.Random(7))
        proc = Process("node-1")
        sched.spawn(proc, "heartbeat", lambda: sched.sleep(1.0))
        sched.run_until(10.0)
    """

    def __init__(self, rng: random.Random) -> None:
        self.now = 0.0
        self._rng = rng
        self._queue: list[tuple[float, float, int, Callable[[], None]]] = []
        self._seq = 0
        self._hub = greenlet.getcurrent()
        self._current: Task | None = None
        self.after_each: Callable[[], None] = lambda: None
        """Called after every event (the invariant checks)."""
        self.ran: Process | None = None
        """The process whose task the last event resumed (``None``: the
        event was the scheduler's own, such as a request landing)."""

    # --- queue -------------------------------------------------------------------

    def at(self, when: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` in the scheduler at virtual time ``when``; work
        due at one instant runs in an order drawn from the seed."""
        self._seq += 1
        heapq.heappush(self._queue, (max(when, self.now), self._rng.random(), self._seq, callback))

    def run_until(self, end: float) -> None:
        """Run every event due up to ``end``; the clock then reads ``end``."""
        if greenlet.getcurrent() is not self._hub:
            raise RuntimeError("run_until is the scheduler's, not a task's")
        while self._queue and self._queue[0][0] <= end:
            when, _tie, _seq, callback = heapq.heappop(self._queue)
            self.now = when
            self.ran = None
            callback()
            self.after_each()
        self.now = max(self.now, end)

    # --- tasks -------------------------------------------------------------------

    @property
    def current(self) -> Task:
        """The task running now.

        Raises:
            RuntimeError: called from the scheduler itself.
        """
        if self._current is None:
            raise RuntimeError("not inside a simulated task")
        return self._current

    def spawn(
        self, process: Process, name: str, fn: Callable[[], object], delay: float = 0.0
    ) -> Task:
        """Start ``fn`` as a task of ``process`` after ``delay`` seconds."""

        def body() -> None:
            try:
                fn()
            except ProcessKilled:
                pass
            finally:
                task.done = True
                process.tasks.discard(task)

        task = Task(name, process, greenlet.greenlet(body, parent=self._hub))
        process.tasks.add(task)
        self.wake(task, self.now + delay)
        return task

    def wake(self, task: Task, when: float) -> None:
        """Resume ``task`` at ``when`` from the wait it is in (or about to
        enter); ignored if something else resumed it first."""
        token = task.wait_id
        self.at(when, lambda: self._switch(task, token))

    def _switch(self, task: Task, token: int) -> None:
        """Resume ``task`` (from the scheduler), unless it ended, its
        process is dead or the wake-up is stale; a paused process resumes
        at the pause's end."""
        if task.done or task.glet.dead or not task.process.alive or token != task.wait_id:
            return
        if task.process.paused_until > self.now:
            self.at(task.process.paused_until, lambda: self._switch(task, token))
            return
        task.wait_id += 1
        self.ran = task.process
        self._current = task
        try:
            task.glet.switch()
        finally:
            self._current = None

    def suspend(self) -> None:
        """Give control back to the scheduler until a ``wake`` resumes us."""
        task = self.current
        self._hub.switch()
        if not task.process.alive:
            raise ProcessKilled(task.process.name)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of virtual time (a task only)."""
        self.wake(self.current, self.now + max(0.0, seconds))
        self.suspend()

    def wait_until(self, when: float) -> None:
        """Wait until virtual time ``when`` (a task only)."""
        self.sleep(when - self.now)

    def kill(self, process: Process) -> None:
        """A kill -9: every task of ``process`` ends now, mid-request or not
        (a request already sent still lands: the store scheduled it)."""
        process.alive = False
        for task in list(process.tasks):
            if task.glet and not task.glet.dead:
                self._current = task  # its unwinding releases its locks
                try:
                    task.glet.throw(ProcessKilled(process.name))
                finally:
                    self._current = None
        process.tasks.clear()

    def pause(self, process: Process, seconds: float) -> None:
        """A SIGSTOP: no task of ``process`` runs for ``seconds``."""
        process.paused_until = max(process.paused_until, self.now + seconds)

    # --- primitives the runtime hands out -----------------------------------------

    def lock(self) -> SimLock:
        """A re-entrant lock whose waiters wait in virtual time."""
        return SimLock(self)

    def pool(self, workers: int, name: str) -> SimPool | None:
        """A request pool of ``workers`` tasks (``None`` for one)."""
        return None if workers <= 1 else SimPool(self, workers, name)

    def condition(self, lock: SimLock) -> SimCondition:
        """A condition variable over ``lock`` whose waiters wait in
        virtual time."""
        return SimCondition(self, lock)

    def future(self) -> SimFuture[Any]:
        """A future whose ``result`` waits in virtual time."""
        return SimFuture(self)

    def executor(self, process: Process, workers: int, name: str) -> SimExecutor:
        """An executor whose workers are tasks of ``process`` (they die
        with it, whoever submitted to them)."""
        return SimExecutor(self, process, workers, name)


class _WithBlock:
    """``with x:`` as ``x.acquire()`` ... ``x.release()``."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
        /,
    ) -> None:
        self.release()


class SimLock(_WithBlock):
    """A re-entrant lock owned by a task: another task that wants it waits
    (in virtual time) for its release, or for ``timeout``."""

    def __init__(self, sched: Scheduler) -> None:
        self._sched = sched
        self._owner: Task | None = None
        self._depth = 0
        self._waiters: list[Task] = []

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = self._sched.current
        if self._owner is None or not self._owner.process.alive or self._owner.done:
            self._owner, self._depth = me, 0
        if self._owner is me:
            self._depth += 1
            return True
        if not blocking:
            return False
        deadline = None if timeout < 0 else self._sched.now + timeout
        self._waiters.append(me)
        try:
            while self._owner is not None and self._owner is not me:
                if deadline is not None and self._sched.now >= deadline:
                    return False
                if deadline is not None:
                    self._sched.wake(me, deadline)
                self._sched.suspend()
                if self._owner is None or not self._owner.process.alive or self._owner.done:
                    self._owner, self._depth = None, 0
        finally:
            self._waiters.remove(me)
        self._owner, self._depth = me, 1
        return True

    def release(self) -> None:
        if self._owner is not self._sched.current:
            raise RuntimeError("release of a lock this task does not hold")
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            for waiter in list(self._waiters):
                self._sched.wake(waiter, self._sched.now)

    def release_all(self) -> int:
        """Release however deep this task holds the lock; return the depth
        (a condition's ``wait`` gives the lock up whole)."""
        depth = self._depth
        self._depth = 1
        self.release()
        return depth

    def restore(self, depth: int) -> None:
        """Take the lock again at ``depth`` (after ``release_all``)."""
        self.acquire()
        self._depth = depth


class SimPool:
    """Runs a round's requests side by side as tasks of the caller's
    process, at most ``workers`` at once; results in order, the first
    failure raised when its result is reached (as ``ThreadPoolExecutor.map``
    does)."""

    def __init__(self, sched: Scheduler, workers: int, name: str) -> None:
        self._sched = sched
        self._workers = workers
        self._name = name

    def map(self, fn: Callable[[Any], T], iterable: Iterable[Any], /) -> Iterator[T]:
        items = list(iterable)
        caller = self._sched.current
        results: list[tuple[bool, Any]] = [(False, None)] * len(items)
        pending = list(range(len(items)))
        running = 0

        def worker() -> None:
            nonlocal running
            while pending:
                index = pending.pop(0)
                try:
                    results[index] = (True, fn(items[index]))
                except Exception as err:  # handed to the caller, as a pool does
                    results[index] = (False, err)
            running -= 1
            if running == 0:
                self._sched.wake(caller, self._sched.now)

        running = min(self._workers, len(items))
        for n in range(running):
            self._sched.spawn(caller.process, f"{self._name}-{n}", worker)
        while running > 0:
            self._sched.suspend()
        return _results(results)

    def shutdown(self, wait: bool = True) -> None:
        """Nothing to release: ``map`` returns once its tasks ended."""


def _results(results: list[tuple[bool, Any]]) -> Iterator[Any]:
    for ok, value in results:
        if not ok:
            raise value
        yield value


class SimCondition(_WithBlock):
    """``threading.Condition`` over a ``SimLock``, in virtual time."""

    def __init__(self, sched: Scheduler, lock: SimLock) -> None:
        self._sched = sched
        self._lock = lock
        self._waiters: list[Task] = []

    def wait(self, timeout: float | None = None) -> bool:
        """Release the lock until ``notify_all`` or ``timeout``; True when
        notified."""
        me = self._sched.current
        depth = self._lock.release_all()
        self._waiters.append(me)
        if timeout is not None:
            self._sched.wake(me, self._sched.now + max(0.0, timeout))
        try:
            self._sched.suspend()
        finally:
            notified = me not in self._waiters
            if not notified:
                self._waiters.remove(me)
            self._lock.restore(depth)
        return notified

    def notify_all(self) -> None:
        for waiter in self._waiters:
            self._sched.wake(waiter, self._sched.now)
        self._waiters.clear()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()


class SimFuture(Future[T]):
    """A ``concurrent.futures.Future`` whose ``result`` and ``exception``
    wait in virtual time (the base class would block the one real
    thread). Resolving it needs no lock another task could hold."""

    def __init__(self, sched: Scheduler) -> None:
        super().__init__()
        self._sched = sched
        self._sim_waiters: list[Task] = []
        self.add_done_callback(self._wake_waiters)

    def _wake_waiters(self, _done: Future[T]) -> None:
        for waiter in self._sim_waiters:
            self._sched.wake(waiter, self._sched.now)

    def _wait(self, timeout: float | None) -> None:
        if self.done():
            return
        me = self._sched.current
        deadline = None if timeout is None else self._sched.now + timeout
        self._sim_waiters.append(me)
        try:
            while not self.done():
                if deadline is not None:
                    if self._sched.now >= deadline:
                        raise TimeoutError("simulated future not resolved in time")
                    self._sched.wake(me, deadline)
                self._sched.suspend()
        finally:
            self._sim_waiters.remove(me)

    def result(self, timeout: float | None = None) -> T:
        self._wait(timeout)
        return super().result(timeout=0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return super().exception(timeout=0)


class SimExecutor:
    """A ``ThreadPoolExecutor`` whose workers are tasks of one process:
    calls run in submission order on at most ``workers`` tasks."""

    def __init__(self, sched: Scheduler, process: Process, workers: int, name: str) -> None:
        self._sched = sched
        self._process = process
        self._workers = max(1, workers)
        self._name = name
        self._queue: collections.deque[tuple[Callable[..., Any], tuple[Any, ...], SimFuture[Any]]]
        self._queue = collections.deque()
        self._running = 0
        self._idle_waiters: list[Task] = []
        self._spawned = 0

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        future: SimFuture[T] = SimFuture(self._sched)
        self._queue.append((fn, args, future))
        if self._running < self._workers:
            self._running += 1
            self._spawned += 1
            self._sched.spawn(self._process, f"{self._name}-{self._spawned}", self._work)
        return future

    def _work(self) -> None:
        try:
            while self._queue:
                fn, args, future = self._queue.popleft()
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    value = fn(*args)
                except Exception as err:  # handed to the future, as a pool does
                    future.set_exception(err)
                else:
                    future.set_result(value)
        finally:
            self._running -= 1
            if self._running == 0:
                for waiter in self._idle_waiters:
                    self._sched.wake(waiter, self._sched.now)

    def shutdown(self, wait: bool = True) -> None:
        """Wait (in virtual time) until every submitted call has ended."""
        if not wait:
            return
        me = self._sched.current
        self._idle_waiters.append(me)
        try:
            while self._running > 0 and self._process.alive:
                self._sched.suspend()
        finally:
            self._idle_waiters.remove(me)
