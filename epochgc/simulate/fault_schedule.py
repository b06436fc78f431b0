"""A simulation's fault schedule: what goes wrong, when and to whom.

Drawn from the seed's own random stream (``draw_schedule``) before the
run starts, so a run is its seed; and a list of independent faults, so a
failing run can be replayed with fewer of them (``shrink`` in
``simulate/seeds.py``) to find the few that matter.

The kinds are the faults a real S3 and real processes produce:

* ``lost_answers``: writes apply but their answer is lost (a timeout,
  then either the retries run out or a retry finds the key changed and
  answers 412);
* ``late_landing``: one node's (or everyone's) requests reach the store 1
  to 4 s after they were sent (client retries, back-off, a slow connect);
  or, where the fault says so, a fixed time late;
* ``brownout``: one process's requests (or everyone's: SlowDown) fail
  with 503 until the retries run out, without being applied;
* ``crash``: kill -9, the node restarts with a new incarnation later;
* ``pause``: the process stops for longer than a lease TTL (SIGSTOP, a
  long collector pause) and carries on as if nothing happened;
* ``join`` / ``leave``: a node starts, or stops cleanly and releases;
* ``foreign_owner``: something other than a node (a restored backup, a
  hand-made edit) rewrites one ownership record, five terms up, to name
  an owner that does not exist;
* ``duplicate``: a node stops (SIGSTOP) and a supervisor that took it for
  dead starts a second process of the same node id; the first wakes up
  later, and for a while two processes of one node id run;
* ``key_errors``: DeleteObjects answers a per-key error (InternalError,
  until the client's retries ran out) for some of its keys, which stay;
  the rest are deleted;
* ``operator_pause``: an operator runs ``gc pause``, then ``gc resume``
  so many seconds later; two that overlap are two operators racing;
* ``topic_race``: an operator deletes a topic and creates it again at
  once, while a second operator (the fault's target) deletes the same
  topic, having read the view just before; the second one's writes land
  ``late_by`` seconds late (a ``late_landing`` fault of writes only, drawn
  with it), so its delete, naming the revision it read, tends to land
  after the recreate, where it must end nothing;
* ``compaction``: an operator runs ``epochgc controller compact`` (a
  snapshot and a truncation of the controller log, racing the
  collector's own compaction and every late write);
* ``lossy_rebalance`` (two faults together): writes land unanswered
  while a killed and restarted node's partitions are taken and handed
  back (see ``_lossy_rebalance``);
* ``producer_stall``: the producer stops for a while between an L0
  upload and that batch's placeholders; meanwhile the partitions' windows
  move on and the object, which no record names yet, may be collected, so
  the placeholders must be refused where they land;
* ``stalled_tick``: the first node to write an epoch tick after the
  fault's time stops (SIGSTOP) for one to two TTLs between reading the
  controller log's tail and writing the next slot; its role runs out, a
  peer ticks, and the stopped node wakes to find its slot taken, where it
  must not retry (``simulate/simulated_store.py``);
* ``hung_loop``: one node's rounds loop or ownership loop (``pick``
  below or above one half) hangs at its next round, for good (a call that
  never returns), or dies there of an exception (``pick`` in the upper
  half of its half); the node's watchdog must judge it, the node let go
  and exit, and it is started again a few seconds later;
* ``restart``: a node stops cleanly (it releases its records and its
  lease, as ``leave``) and starts again, with a new incarnation, so many
  seconds later (a rolling deploy);
* ``lossy_restart`` (two faults together): a ``restart`` while the writes
  of ownership records land unanswered (see ``_lossy_restart``);
* ``slowdown``: one prefix of the bucket sustains only 2 to 10 requests
  a second for a while (S3 answers 503 SlowDown above a prefix's rate,
  most of all while it repartitions); a request over the rate is retried
  with a jittered, doubling back-off, a few times, then its retries run
  out. The prefix is one of ``throttled_prefixes``: the L0 objects, the
  partition logs, the ownership records, the node leases, the controller
  log or the node reports;
* ``late_then_cut`` (two faults together): one node's requests land 3 to 5
  s late for a while, and as that ends a peer is cut off from the store
  (a brownout of all its requests). The node then judges the peer's last
  renewal by the store's stamps against a write of its own that the store
  stamped late, and takes over with writes that land at once: the one
  run in which the bound of its own write must be the answer's arrival,
  not its sending (the two differ by the landing delay).

Gateways whose clocks disagree and LastModified in whole seconds are the
store's standing properties (``StoreModel``), not faults.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from epochgc.simulate.collector_ghost import COLLECTOR
from epochgc.storage.keys import (
    controller_log_prefix,
    l0_prefix,
    nodes_prefix,
    owners_prefix,
    partitions_prefix,
    reports_prefix,
)

KINDS = (
    "lost_answers",
    "late_landing",
    "brownout",
    "crash",
    "pause",
    "join",
    "leave",
    "foreign_owner",
    "duplicate",
    "operator_pause",
    "key_errors",
    "topic_race",
    "compaction",
    "producer_stall",
    "stalled_tick",
    "hung_loop",
    "restart",
    "slowdown",
)
TOPIC_RACE_SECONDS = 20.0
"""How long the racing operator's requests land late: its delete, a lost
slot, its back-off and a second slot fit in it."""
RECREATE_DELAY_SECONDS = 0.01
"""How long after the racing operator starts the recreating one does
(the racer has read the view by then; its write has not landed)."""


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` on ``target`` (a node id; empty: every
    process) from ``at`` for ``seconds`` of virtual time."""

    kind: str
    at: float
    seconds: float
    target: str = ""
    rate: float = 0.0
    """For ``lost_answers`` and ``brownout``: the share of requests hit;
    for ``slowdown``: the requests a second the prefix sustains."""
    pick: float = 0.0
    """For ``foreign_owner``: which partition, as a fraction of the list;
    for ``hung_loop``: which loop (below one half: the rounds loop) and
    how (in the upper half of that half: it dies, else it hangs)."""
    late_by: float = 0.0
    """For ``late_landing``: how late every request lands (``0``: each
    request draws its own delay from ``LATE_LANDING_SECONDS``)."""
    count: int = 0
    """For ``topic_race``: the recreated topic's partitions."""
    retried: float = 0.5
    """For ``lost_answers``: the share of lost answers to conditional
    writes that landed which the client's retry turns into a 412 (the
    key changed: by this very write); the rest time out until the
    retries run out."""
    prefix: str = ""
    """For ``lost_answers``: only writes of keys under this prefix (a
    store's index partition that answers slowly); empty: every key. For
    ``slowdown``: the prefix whose rate is limited."""
    writes_only: bool = False
    """For ``late_landing``: only writes land late (a slow upload, a PUT
    retried after a timeout); reads land on time."""

    def describe(self) -> str:
        who = self.target or "everyone"
        rate = f" ({self.rate:.0%} of requests)" if self.rate else ""
        if self.kind == "slowdown":
            rate = f" ({self.rate:g} requests/s)"
        late = f" ({self.late_by:.2f}s late)" if self.late_by else ""
        count = f" ({self.count} partitions)" if self.count else ""
        writes = " (writes only)" if self.writes_only else ""
        keys = f" (keys under {self.prefix})" if self.prefix else ""
        return (
            f"{self.at:7.2f}s {self.kind} {who} for {self.seconds:.2f}s"
            f"{rate}{late}{count}{writes}{keys}"
        )

    def covers(self, t: float, target: str, key: str = "") -> bool:
        """Active at ``t`` for a process of node ``target`` (and, for a
        fault limited to a prefix, a request for ``key``)."""
        return (
            self.at <= t < self.at + self.seconds
            and self.target in ("", target)
            and key.startswith(self.prefix)
        )


def draw_schedule(
    rng: random.Random,
    nodes: list[str],
    spare: list[str],
    until: float,
    ttl: float,
    *,
    root: str,
) -> list[Fault]:
    """The faults of one run, all before ``until`` (the heal phase follows):
    a few of each kind, on the ``nodes`` that start the run; ``spare`` node
    ids may join; ``root`` is the bucket layout's root (for the faults
    limited to a prefix)."""
    faults: list[Fault] = []

    def add(kind: str, seconds: float, target: str = "", rate: float = 0.0) -> None:
        # Every fault ends by ``until``: the heal phase is fault-free. A
        # crashed node restarts early enough to have waited out its old
        # lease (a TTL) and joined by then too.
        end = until - (ttl + 5.0 if kind == "crash" else 0.0)
        seconds = min(seconds, end - 10.0)
        at = rng.uniform(5.0, end - seconds)
        faults.append(Fault(kind, at, seconds, target, rate))

    for _ in range(rng.randint(2, 5)):
        add("lost_answers", rng.uniform(10, 60), rate=rng.choice((0.1, 0.3, 0.6)))
    for _ in range(rng.randint(3, 8)):
        add("late_landing", rng.uniform(10, 60), rng.choice([*nodes, ""]))
    for _ in range(rng.randint(2, 5)):
        target = rng.choice([*nodes, ""])
        add("brownout", rng.uniform(3, ttl * 1.5), target, rng.choice((0.5, 0.9, 1.0)))
        if target and rng.random() < 0.5:
            # A node whose network is failing: what gets through lands late.
            last = faults[-1]
            late_for = min(last.seconds + 3.0, until - last.at)
            faults.append(Fault("late_landing", last.at, late_for, target))
    for _ in range(rng.randint(2, 5)):
        add("crash", rng.uniform(1, 3 * ttl), rng.choice(nodes))
    for _ in range(rng.randint(1, 4)):
        add("pause", rng.uniform(ttl * 0.5, ttl * 2), rng.choice(nodes))
    for _ in range(rng.randint(0, 2)):
        add("duplicate", rng.uniform(ttl * 0.5, ttl * 2), rng.choice(nodes))
    for _ in range(rng.randint(0, 2)):
        # Well before the end: a node notices at its next read of every
        # record it holds (up to 1.5 relist intervals).
        faults.append(
            Fault("foreign_owner", rng.uniform(5.0, until - 150.0), 0.0, pick=rng.random())
        )
    for node in spare:
        if rng.random() < 0.8:
            add("join", 0.0, node)
    for node in nodes[2:]:
        if rng.random() < 0.4:
            add("leave", 0.0, node)
    # Drawn last, so the faults above are each seed's as they were.
    for _ in range(rng.randint(0, 2)):
        judge, cut = rng.sample(nodes, 2)
        late_for = rng.uniform(6.0, 15.0)
        at = rng.uniform(5.0, until - late_for - 1.5 * ttl - 10.0)
        faults.append(Fault("late_landing", at, late_for, judge, late_by=rng.uniform(3.0, 5.0)))
        cut_at = at + late_for - rng.uniform(0.0, 2.0)
        faults.append(Fault("brownout", cut_at, 1.5 * ttl, cut, rate=1.0))
    # Drawn after those, for the same reason.
    for _ in range(rng.randint(1, 5)):
        add("operator_pause", rng.uniform(2.0, 60.0))
    for _ in range(rng.randint(0, 3)):
        target = rng.choice(["", COLLECTOR])
        add("key_errors", rng.uniform(10.0, 60.0), target, rng.choice((0.1, 0.5)))
    # Drawn after those, for the same reason. Well before the end: the
    # recreated topic's partitions are led and reported before the heal.
    for race in range(rng.randint(0, 2)):
        racer = f"topic-racer-{race + 1}"
        at = rng.uniform(5.0, until - 120.0)
        late_by = rng.uniform(0.5, 3.0)
        faults.append(
            Fault(
                "topic_race",
                at,
                TOPIC_RACE_SECONDS,
                racer,
                pick=rng.random(),
                count=rng.randint(1, 4),
            )
        )
        faults.append(
            Fault("late_landing", at, TOPIC_RACE_SECONDS, racer, late_by=late_by, writes_only=True)
        )
    # Drawn after those, for the same reason.
    for _ in range(rng.randint(0, 3)):
        faults.append(Fault("compaction", rng.uniform(5.0, until - 10.0), 0.0))
    # Drawn after those, for the same reason.
    for _ in range(rng.randint(0, 2)):
        faults.extend(_lossy_rebalance(rng, nodes, until, ttl))
    # Drawn after those, for the same reason. Long enough for an idle
    # partition's window to move two epochs on and a collector round to run.
    for _ in range(rng.randint(0, 2)):
        add("producer_stall", rng.uniform(15.0, 60.0))
    # Drawn after those, for the same reason.
    for _ in range(rng.randint(0, 2)):
        add("stalled_tick", rng.uniform(ttl, 2 * ttl))
    # Drawn after those, for the same reason. Early enough for the watchdog
    # (four TTLs), the let-go, the restart and a take-over before the heal.
    for _ in range(rng.randint(0, 2)):
        at = rng.uniform(5.0, until - 6 * ttl - 20.0)
        faults.append(Fault("hung_loop", at, 0.0, rng.choice(nodes), pick=rng.random()))
    # Drawn after those, for the same reason.
    for _ in range(rng.randint(1, 3)):
        faults.extend(_lossy_restart(rng, nodes, until, owners_prefix(root)))
    # Drawn after those, for the same reason.
    for _ in range(rng.randint(0, 2)):
        prefix = rng.choice(throttled_prefixes(root))
        seconds = rng.uniform(10.0, 60.0)
        at = rng.uniform(5.0, until - seconds)
        faults.append(
            Fault("slowdown", at, seconds, rate=rng.choice((2.0, 5.0, 10.0)), prefix=prefix)
        )
    return sorted(faults, key=lambda f: (f.at, f.kind, f.target))


def _lossy_rebalance(rng: random.Random, nodes: list[str], until: float, ttl: float) -> list[Fault]:
    """``lossy_rebalance`` (two faults together): a node is killed and
    restarted at once; it waits out its old lease (a TTL) before it joins
    again, about when the others judge it dead and take its partitions,
    so partitions are taken and handed back within a round or two. Over
    that time everyone's writes land unanswered (60 or 90% of them, for
    fewer seconds than a lease survives): a term raise of a partition
    just taken lands, its answer lost, and the taker holds an old ETag
    when it hands the partition back."""
    peer = rng.choice(nodes)
    killed_at = rng.uniform(5.0, until - 3 * ttl - 20.0)
    spell = rng.uniform(8.0, 14.0)
    return [
        Fault("crash", killed_at, rng.uniform(0.5, 3.0), peer),
        Fault("lost_answers", killed_at + ttl - 2.0, spell, rate=rng.choice((0.6, 0.9))),
    ]


def throttled_prefixes(root: str) -> list[str]:
    """The prefixes a ``slowdown`` may throttle, each a hot spot of its own."""
    return [
        l0_prefix(root),
        partitions_prefix(root),
        owners_prefix(root),
        nodes_prefix(root),
        controller_log_prefix(root),
        reports_prefix(root),
    ]


def _lossy_restart(rng: random.Random, nodes: list[str], until: float, owners: str) -> list[Fault]:
    """``lossy_restart`` (two faults together): one node is restarted
    cleanly (a rolling deploy: it releases its records and its lease and
    starts again a few seconds later), while the writes of ownership
    records land unanswered and their retries answer 412 (the store's
    index partition for that prefix times out). Its peers take its
    partitions; when it is back, before their next round, those
    partitions leave the takers' shares at once, and a taker never reads
    their records again: only a taker that counts its landed write as its
    own (the re-read in ``storage/conditional_put.py``) hands them back.
    Other writes are answered, so the nodes' leases stay as they were."""
    at = rng.uniform(5.0, until - 90.0)
    down = rng.uniform(2.0, 8.0)
    spell = rng.uniform(15.0, 25.0)
    rate = rng.choice((0.6, 0.9))
    return [
        Fault("restart", at, down, rng.choice(nodes)),
        Fault("lost_answers", at - 1.0, spell, rate=rate, retried=1.0, prefix=owners),
    ]
