"""The benchmarks' failover timing: the busiest node is the one killed,
each milestone is timed from the kill on the poll that first sees it, and
one never seen within the limit is ``inf``."""

from __future__ import annotations

import math

from bench._failover import VirtualTime, kill_busiest


class Cluster:
    """Three nodes in virtual time; the survivors take the killed node's
    partitions over one by one, one every ``pace`` seconds."""

    def __init__(self, pace: float) -> None:
        self.held = {"a": {1, 2}, "b": {3, 4, 5}, "c": {6, 7, 8}}
        self.led: dict[str, set[int]] = {name: set() for name in self.held}
        self.killed: list[str] = []
        self.time = 0.0
        self.pace = pace
        self.orphans: list[int] = []
        self.next_move = math.inf

    def kill(self, name: str) -> None:
        self.killed.append(name)
        self.orphans = sorted(self.held[name])
        self.held[name] = set()
        self.next_move = self.time + self.pace

    def run_until(self, at: float) -> None:
        while self.orphans and self.next_move <= at:
            self.next_move += self.pace
            partition = self.orphans.pop(0)
            self.held["a"].add(partition)
            if not self.orphans:
                self.led["a"] |= self.held["a"]
        self.time = at


def test_the_busiest_node_is_killed_and_each_milestone_timed() -> None:
    cluster = Cluster(pace=1.0)
    clock = VirtualTime(lambda: cluster.time, cluster.run_until, poll_seconds=0.25)
    failover = kill_busiest(list(cluster.held), cluster.held.__getitem__, cluster.kill, clock)
    assert (failover.victim, failover.partitions, failover.others) == ("b", {3, 4, 5}, ["a", "c"])
    assert cluster.killed == ["b"]
    polls: list[float] = []
    seconds = failover.time(
        {
            "first": lambda: 3 in cluster.held["a"],
            "all": lambda: failover.taken_over(cluster.held.__getitem__),
            "led": lambda: failover.taken_over(cluster.led.__getitem__),
        },
        limit_seconds=10,
        on_poll=lambda: polls.append(cluster.time),
    )
    assert seconds == {"first": 1.0, "all": 3.0, "led": 3.0}
    assert polls == [0.25 * i for i in range(1, 13)]


def test_a_milestone_not_reached_within_the_limit_is_inf() -> None:
    cluster = Cluster(pace=4.0)
    clock = VirtualTime(lambda: cluster.time, cluster.run_until, poll_seconds=0.5)
    failover = kill_busiest(list(cluster.held), cluster.held.__getitem__, cluster.kill, clock)
    seconds = failover.time(
        {"all": lambda: failover.taken_over(cluster.held.__getitem__)}, limit_seconds=10
    )
    assert math.isinf(seconds["all"])
    assert cluster.time == 10.0
