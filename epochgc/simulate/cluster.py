"""The simulated cluster: reconciler nodes running the product's lease
and ownership code, the leading step that fences a partition log with its
term, and the ghost state the invariants are checked against.

Each node is one simulated process with three tasks, the thin shells the
real node runs around the same steps:

* the lease heartbeat: ``NodeLease.renew_if_due`` every quarter of the
  renew interval (``PeriodicThread`` in production);
* the ownership loop: ``ensure_lease`` then ``NodeOwnership.run_round``,
  paced by ``ownership.pacing`` as the node paces it;
* the leading loop: every partition in ``owned()`` not yet led at its
  term is led: the partition log's term is read; a log already at or
  above the record's term makes the node ``raise_term`` (as
  ``reconciler/node.py`` does); then ``term_start`` is written to the log
  by compare-and-swap, and only a higher term may replace a lower one.

The partition log is a single object per partition here (its term and
leader), enough for the term fence; the data path (producers, reconciler,
collector) is not in this scenario yet.

Ghost state is what no process knows: which processes are alive, which
incarnation wrote which term. Invariants:

* ``two owners``: no partition is in two live nodes' ``owned()`` at any
  instant (checked after every event);
* ``two leaders in one term``: no term of a partition log is started by
  two incarnations;
* after the heal phase: every partition is owned and led by a live node
  (``unled``), no ownership record names a live incarnation that does
  not own it (``orphaned``), and no node owns a partition whose record
  names another (``owned against its record``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from epochgc.errors import EpochGCError
from epochgc.leases.holder_codec import OwnerDocument, decode_owner, encode_owner
from epochgc.leases.node_lease import NodeLease
from epochgc.leases.timing import LeasePolicy
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.ownership.pacing import OwnershipPacing, stale_look_fraction
from epochgc.runtime import Runtime
from epochgc.simulate.simulated_store import EPOCH_ORIGIN, Network, StoreView
from epochgc.simulate.virtual_time import Process, Scheduler
from epochgc.storage.conditional_put import put_conditionally
from epochgc.storage.keys import PartitionId, owner_key
from epochgc.storage.object_store import get_or_none

ROOT = "epochgc"
FOREIGN_OWNER = "operator"
"""The owner an outside writer names (no such node ever runs)."""
LEAD_INTERVAL_SECONDS = 1.0
APPEND_EVERY_TICKS = 5
"""A leader appends to each partition it leads every 5 leading ticks."""
RAISE_TERM_WAIT_SECONDS = 2.0


class Violation(Exception):
    """An invariant broke: the run stops here."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


@dataclass(frozen=True)
class ClusterSettings:
    """The shape of a simulated cluster."""

    partitions: tuple[PartitionId, ...]
    policy: LeasePolicy = field(default_factory=LeasePolicy)
    round_seconds: float = 5.0
    relist_records_seconds: float = 60.0
    max_moves_per_round: int = 64
    request_concurrency: int = 4


def log_key(pid: PartitionId) -> str:
    """The simulated partition log object (term fence) of ``pid``."""
    return f"{ROOT}/sim/logs/{pid.topic}/{pid.revision}/{pid.partition}"


class SimNode:
    """One incarnation of a node id: a process, its runtime, its lease and
    ownership, and its loops."""

    def __init__(self, world: World, node_id: str, generation: int) -> None:
        self.world = world
        self.node_id = node_id
        self.process = Process(f"{node_id}#{generation}")
        rng = world.rng
        sched = world.sched
        drift = 1.0 + rng.uniform(-100e-6, 100e-6)
        mono_base = rng.uniform(1_000.0, 1_000_000.0)
        wall_offset = rng.uniform(-2 * 86_400, 2 * 86_400)
        started = sched.now
        self.runtime = Runtime(
            wall=lambda: EPOCH_ORIGIN + timedelta(seconds=wall_offset + sched.now * drift),
            monotonic=lambda: mono_base + (sched.now - started) * drift,
            sleep=sched.sleep,
            lock=sched.lock,
            request_pool=sched.pool,
            new_id=lambda: f"{rng.getrandbits(64):016x}",
        )
        self.store = StoreView(world.network, node_id, self.process)
        settings = world.settings
        self.lease = NodeLease(
            self.store, ROOT, node_id, policy=settings.policy, runtime=self.runtime
        )
        self.ownership = NodeOwnership(
            self.store,
            ROOT,
            self.lease,
            max_moves_per_round=settings.max_moves_per_round,
            runtime=self.runtime,
            relist_records_seconds=settings.relist_records_seconds,
            request_concurrency=settings.request_concurrency,
        )
        self.led: dict[PartitionId, int] = {}
        self.leaving = False

    def start(self) -> None:
        sched = self.world.sched
        sched.spawn(self.process, "heartbeat", self._heartbeat)
        sched.spawn(self.process, "ownership", self._ownership_loop)
        sched.spawn(self.process, "leading", self._leading_loop)

    def _heartbeat(self) -> None:
        interval = max(0.05, self.lease.policy.renew_interval_seconds / 4)
        while not self.leaving:
            self.lease.renew_if_due()
            self.runtime.sleep(interval)

    def _ownership_loop(self) -> None:
        settings = self.world.settings
        pacing = OwnershipPacing(settings.round_seconds, stale_look_fraction(self.node_id))
        while not self.leaving:
            report = None
            try:
                if not self.lease.is_valid():
                    if not self.ownership.ensure_lease():
                        self.runtime.sleep(settings.round_seconds)
                        continue
                    self.world.note(f"{self.process.name} node lease {self.lease.incarnation}")
                    self.runtime.sleep(settings.round_seconds)
                report = self.ownership.run_round(settings.partitions)
                if report.taken or report.taken_over or report.handed_back or report.lost:
                    self.world.note(
                        f"{self.process.name} round: took {report.taken}, took over "
                        f"{report.taken_over}, handed back {report.handed_back}, lost "
                        f"{report.lost}; owns {report.owned}"
                    )
            except EpochGCError as err:
                self.world.note(f"{self.process.name} ownership round failed: {err}")
            stale_at = None if report is None else report.next_stale_at
            nodes = 0 if report is None else report.nodes
            self.runtime.sleep(pacing.after_round(self.runtime.monotonic(), stale_at, nodes))

    def _leading_loop(self) -> None:
        ticks = 0
        while not self.leaving:
            ticks += 1
            owned = self.ownership.owned()
            for pid in [p for p in self.led if p not in owned]:
                del self.led[pid]
            for pid in sorted(owned, key=str):
                term = self.ownership.term(pid)
                try:
                    if self.led.get(pid) != term:
                        self._lead(pid)
                    elif term is not None and ticks % APPEND_EVERY_TICKS == 0:
                        self._append(pid, term)
                except EpochGCError as err:
                    # A leader whose write failed has spent its term: it
                    # leads again above it (``raise_term``).
                    self.led.pop(pid, None)
                    self.world.note(f"{self.process.name} leading {pid} failed: {err}")
            self.runtime.sleep(LEAD_INTERVAL_SECONDS)

    def _append(self, pid: PartitionId, term: int) -> None:
        """One append to the partition log in ``term``: read the log, write
        the next entry over the version read (the log's term fences a
        deposed leader), after checking the lease as a leader does."""
        key = log_key(pid)
        stored = get_or_none(self.store, key)
        doc = None if stored is None else json.loads(stored.body)
        if stored is None or doc is None or doc["term"] != term:
            self.led.pop(pid, None)  # fenced: a later term started
            return
        if self.ownership.term(pid) != term:
            return
        body = json.dumps(
            {
                "term": term,
                "node": self.node_id,
                "incarnation": self.lease.incarnation,
                "seq": int(doc.get("seq", 0)) + 1,
            }
        ).encode()
        if put_conditionally(self.store, key, body, stored.etag) is None:
            self.led.pop(pid, None)  # the log moved under us

    def _lead(self, pid: PartitionId) -> None:
        term = self.ownership.term(pid)
        if term is None:
            return
        key = log_key(pid)
        stored = get_or_none(self.store, key)
        log_term = 0 if stored is None else int(json.loads(stored.body)["term"])
        if log_term >= term:
            raised = self.ownership.raise_term(pid, log_term, wait_seconds=RAISE_TERM_WAIT_SECONDS)
            if raised is None:
                return
            self.world.note(f"{self.process.name} raised {pid} to term {raised}")
            term = raised
        if self.ownership.term(pid) != term:
            return  # lost it meanwhile: a leader checks its lease before writing
        body = json.dumps(
            {"term": term, "node": self.node_id, "incarnation": self.lease.incarnation}
        ).encode()
        etag = None if stored is None else stored.etag
        if put_conditionally(self.store, key, body, etag) is None:
            return  # the log moved: read again next time
        self.led[pid] = term
        self.world.note(f"{self.process.name} leads {pid} at term {term}")

    def leave(self) -> None:
        """Stop cleanly: release every record and the lease (a task)."""
        self.leaving = True
        self.ownership.stop(release=True)
        self.world.note(f"{self.process.name} left")


class World:
    """The scheduler, the network, the nodes and the ghost state."""

    def __init__(
        self,
        sched: Scheduler,
        network: Network,
        rng: random.Random,
        settings: ClusterSettings,
        note: Callable[[str], None],
    ) -> None:
        self.sched = sched
        self.network = network
        self.rng = rng
        self.settings = settings
        self.note = note
        self.nodes: dict[str, SimNode] = {}
        """The newest process of each node id."""
        self.extra: list[SimNode] = []
        """Older processes of a node id still running beside its newest
        (``duplicate``)."""
        self.generations: dict[str, int] = {}
        self.term_starts: dict[tuple[PartitionId, int], tuple[str, str]] = {}
        """(partition, term) -> the incarnation whose entries it holds."""
        self.log_terms: dict[PartitionId, int] = {}
        self._log_keys = {log_key(pid): pid for pid in settings.partitions}
        network.on_landed = self.landed
        self.overruled: dict[PartitionId, set[str]] = {}
        """Partitions an outside writer took from the processes named, which
        own them until they next read the record (up to 1.5 relist
        intervals): meanwhile a node may take it again, and only the
        partition log's term fence separates the two, so they are not
        counted as two owners."""

    # --- life cycle --------------------------------------------------------------

    def start_node(self, node_id: str) -> SimNode:
        generation = self.generations.get(node_id, 0) + 1
        self.generations[node_id] = generation
        node = SimNode(self, node_id, generation)
        self.nodes[node_id] = node
        node.start()
        self.note(f"{node.process.name} started")
        return node

    def crash(self, node_id: str, restart_after: float) -> None:
        node = self.nodes.get(node_id)
        if node is None or not node.process.alive:
            return
        self.sched.kill(node.process)
        self.note(f"{node.process.name} killed (-9); restarts in {restart_after:.1f}s")
        self.sched.at(self.sched.now + restart_after, lambda: self._restart(node_id))

    def _restart(self, node_id: str) -> None:
        node = self.nodes.get(node_id)
        if node is not None and (node.process.alive or node.leaving):
            return
        self.start_node(node_id)

    def pause(self, node_id: str, seconds: float) -> None:
        node = self.nodes.get(node_id)
        if node is not None and node.process.alive:
            self.sched.pause(node.process, seconds)
            self.note(f"{node.process.name} paused for {seconds:.1f}s")

    def duplicate(self, node_id: str, seconds: float) -> None:
        """Pause ``node_id``'s process for ``seconds`` and start a second
        process of the same node id at once (a supervisor that took the
        stopped one for dead); the first wakes up later."""
        node = self.nodes.get(node_id)
        if node is None or not node.process.alive or node.leaving:
            return
        self.sched.pause(node.process, seconds)
        self.note(f"{node.process.name} stopped for {seconds:.1f}s; a second process starts")
        self.extra.append(node)
        self.start_node(node_id)

    def leave(self, node_id: str) -> None:
        node = self.nodes.get(node_id)
        if node is not None and node.process.alive and not node.leaving:
            self.sched.spawn(node.process, "leave", node.leave)

    def rewrite_owner(self, pick: float) -> None:
        """An outside writer (a restored backup, a hand-made edit) names a
        node that does not exist as the owner of one partition, five terms
        up (the record as ``OwnershipStore`` writes it). Naming a live
        node's current incarnation is left out: only a protocol
        participant knows it, and a node never reads a record outside its
        share that it did not write."""
        partitions = self.settings.partitions
        pid = partitions[min(int(pick * len(partitions)), len(partitions) - 1)]
        key = owner_key(ROOT, pid)
        stored = get_or_none(self.network.bucket, key)
        term = 0 if stored is None else decode_owner(stored.body, key).term
        doc = OwnerDocument(FOREIGN_OWNER, "manual", term + 5, self.sched_wall())
        self.network.bucket.put(key, encode_owner(doc))
        holders = {n.process.name for n in self.processes() if pid in n.ownership.owned()}
        self.overruled[pid] = holders
        self.note(f"outside writer: {pid} now names {FOREIGN_OWNER} at term {term + 5}")

    def sched_wall(self) -> datetime:
        return EPOCH_ORIGIN + timedelta(seconds=self.sched.now)

    def processes(self) -> list[SimNode]:
        """Every node process started, newest of each id first."""
        return [*self.nodes.values(), *self.extra]

    def live_nodes(self) -> list[SimNode]:
        """Every process running and not leaving (two of one node id after
        a ``duplicate``)."""
        return [n for n in self.processes() if n.process.alive and not n.leaving]

    # --- ghost state and invariants -----------------------------------------------

    def landed(self, key: str, body: bytes) -> None:
        """Every write that reached the bucket: a partition log's entries of
        one term come from one incarnation, and its term never goes back."""
        pid = self._log_keys.get(key)
        if pid is None:
            return
        doc = json.loads(body)
        term, writer = int(doc["term"]), (str(doc["node"]), str(doc["incarnation"]))
        first = self.term_starts.setdefault((pid, term), writer)
        if first != writer:
            raise Violation(
                "two leaders in one term",
                f"{pid} term {term}: entries of {first[0]} ({first[1]}) and "
                f"{writer[0]} ({writer[1]})",
            )
        if term < self.log_terms.get(pid, 0):
            raise Violation("log term went back", f"{pid}: term {term} after {self.log_terms[pid]}")
        self.log_terms[pid] = term

    def check_safety(self) -> None:
        """After every event: no partition in two live nodes' ``owned()``
        (but see ``overruled``)."""
        owners: dict[PartitionId, str] = {}
        for pid, holders in self.overruled.items():
            holders.intersection_update(
                n.process.name
                for n in self.processes()
                if n.process.alive and pid in n.ownership.owned()
            )
        for node in self.processes():
            if not node.process.alive:
                continue
            for pid in node.ownership.owned():
                if node.process.name in self.overruled.get(pid, ()):
                    continue
                other = owners.setdefault(pid, node.process.name)
                if other != node.process.name:
                    raise Violation(
                        "two owners",
                        f"{pid} is owned by {other} and {node.process.name} at once",
                    )

    def check_liveness(self) -> None:
        """After the heal phase: every partition owned and led, no record
        naming a live incarnation that does not own it."""
        bucket = self.network.bucket
        live = self.live_nodes()
        for pid in self.settings.partitions:
            stored = get_or_none(bucket, owner_key(ROOT, pid))
            named: dict[str, object] = {} if stored is None else json.loads(stored.body)
            for node in live:
                owns = pid in node.ownership.owned()
                names_it = (
                    named.get("node") == node.node_id
                    and named.get("incarnation") == node.lease.incarnation
                )
                if names_it and not owns and not named.get("released", False):
                    raise Violation(
                        "orphaned",
                        f"{pid}'s record names live {node.process.name} "
                        f"(incarnation {node.lease.incarnation}, term {named.get('term')}), "
                        "which does not own it: nobody may lead it",
                    )
                if owns and not names_it:
                    raise Violation(
                        "owned against its record",
                        f"{node.process.name} still owns {pid}, whose record names "
                        f"{named.get('node')}",
                    )
            leaders = [
                n
                for n in live
                if pid in n.ownership.owned() and n.led.get(pid) == n.ownership.term(pid)
            ]
            if not leaders:
                raise Violation("unled", f"{pid} is led by no live node after the heal phase")
