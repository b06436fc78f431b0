"""Benchmark helper: kill the busiest node, then time until what it held is
taken over.

Every ownership benchmark measures failover the same way: the node holding
the most partitions is killed (it stops renewing and acting, releases
nothing), and the time runs from the kill until each milestone holds (its
partitions owned by the survivors, then led by them), checked once per
poll and given up at a limit. Only the clock differs: real time for nodes
running as threads (``RealTime``), the scheduler's virtual time for the
simulations (``VirtualTime``). Example::

    failover = kill_busiest(nodes, lambda n: n.owned(), lambda n: n.kill(), RealTime(0.05))
    failover.time({"owned": lambda: failover.taken_over(lambda n: n.owned())}, limit_seconds=20)
    failover.seconds["owned"]  # math.inf if not within the limit
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

N = TypeVar("N")
P = TypeVar("P")


class FailoverClock(Protocol):
    def now(self) -> float:
        """The time of the kill."""
        ...

    def tick(self, previous: float) -> float:
        """Let one poll interval pass after ``previous``; the time now."""
        ...


class RealTime:
    """Wall time: each tick sleeps ``poll_seconds`` (nodes run as threads)."""

    def __init__(self, poll_seconds: float) -> None:
        self.poll_seconds = poll_seconds

    def now(self) -> float:
        return time.monotonic()

    def tick(self, previous: float) -> float:
        time.sleep(self.poll_seconds)
        return time.monotonic()


class VirtualTime:
    """A simulation's time: each tick runs the simulation ``poll_seconds``
    further (``run_until``) and is exactly that much later."""

    def __init__(
        self, now: Callable[[], float], run_until: Callable[[float], None], poll_seconds: float
    ) -> None:
        self._now = now
        self._run_until = run_until
        self.poll_seconds = poll_seconds

    def now(self) -> float:
        return self._now()

    def tick(self, previous: float) -> float:
        at = previous + self.poll_seconds
        self._run_until(at)
        return at


@dataclass
class Failover(Generic[N, P]):
    """A killed node, what it held, the survivors, and the seconds from the
    kill until each milestone held (``math.inf``: not within the limit)."""

    victim: N
    partitions: set[P]
    others: list[N]
    killed_at: float
    clock: FailoverClock
    seconds: dict[str, float] = field(default_factory=dict)

    def taken_over(self, holding: Callable[[N], Set[P]]) -> bool:
        """Every partition of the victim is held by a survivor."""
        return self.partitions <= set().union(*(holding(n) for n in self.others))

    def time(
        self,
        milestones: Mapping[str, Callable[[], bool]],
        *,
        limit_seconds: float,
        on_poll: Callable[[], None] | None = None,
    ) -> dict[str, float]:
        """Poll until every milestone has held once, or ``limit_seconds``
        after the kill; ``on_poll`` runs at each poll before the checks."""
        self.seconds.update(dict.fromkeys(milestones, math.inf))
        at, limit = self.killed_at, self.killed_at + limit_seconds
        while at < limit and any(math.isinf(self.seconds[m]) for m in milestones):
            at = self.clock.tick(at)
            if on_poll is not None:
                on_poll()
            for name, reached in milestones.items():
                if math.isinf(self.seconds[name]) and reached():
                    self.seconds[name] = at - self.killed_at
        return self.seconds


def kill_busiest(
    nodes: Sequence[N],
    holding: Callable[[N], Set[P]],
    kill: Callable[[N], None],
    clock: FailoverClock,
) -> Failover[N, P]:
    """Kill the node that holds the most partitions (the first of them in
    ``nodes`` on a tie) and start the failover clock."""
    victim = max(nodes, key=lambda n: len(holding(n)))
    partitions = set(holding(victim))
    kill(victim)
    others = [n for n in nodes if n is not victim]
    return Failover(victim, partitions, others, clock.now(), clock)
