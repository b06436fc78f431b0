"""The simulated cluster: reconciler nodes running the product's lease,
ownership, partition log and reconciler code, the data path beside them
(``data_path.py``: ticker, producer, collector), and the ghost state the
invariants are checked against.

Each node is one simulated process with four tasks, the thin shells the
real node runs around the same steps:

* the lease heartbeat: ``NodeLease.renew_if_due`` every quarter of the
  renew interval (``PeriodicThread`` in production);
* the ownership loop: ``ensure_lease`` then ``NodeOwnership.run_round``,
  paced by ``ownership.pacing`` as the node paces it;
* the leading loop (``reconciler/node.py``'s round, ``leadership.py``
  and ``duties.py``): every step reads the controller view first (the
  live partitions are those of live epochgc topics; the ownership loop
  waits for the first read and balances those); on a failed read the last
  view stands and nothing new is led; every partition in ``owned()`` and
  live not yet led at its term is led with
  ``start_leading`` (the real ``PartitionReplica`` and ``TermWriter``,
  raising the record's term above a log that holds it); one it no longer
  owns at that term, whose writer failed or whose topic is gone is
  dropped; every
  ``RECONCILE_EVERY_TICKS`` each led partition is reconciled
  (``Reconciler.reconcile_once``: L0 to L1, then ``advance_reconciled``),
  an idle one gets ``advance_epoch``, and the node report with each led
  partition's ``M(p)`` is published (``report_of``, ``publish_report``);
* the supervisor (``ReconcilerNode.run``): the ownership and leading
  loops report each round to the node's ``ProgressWatchdog``, which is
  the lease's renewal gate; on its verdict (a loop hung or dead) the node
  releases its lease, steps down, releases its records and exits, and
  starts again ``EXIT_RESTART_SECONDS`` later.

The producer's chunks reach a leader as a request to its process, which
calls ``TermWriter.submit`` there (the epoch fence in front of it in
production is a throughput device; the durable guard is the state
machine's apply-time check, which runs here).

Ghost state is what no process knows: which processes are alive, which
process wrote which log entry, which records a leader applied, which L1
objects landed. Invariants:

* ``two owners``: no partition of an incarnation not yet deleted is in
  two live nodes' ``owned()`` at any instant (checked after every event);
* ``two leaders in one term``: the entries of one term of a partition log
  are all written by one process;
* ``deleted too soon`` and ``record lost`` (``data_path.DataGhost``);
* ``incarnation ended without a delete naming it`` (``topic_ghost``:
  judged after every topic entry that lands and every deletion);
* after the heal phase: every partition of a live topic is owned and led
  by a live node
  (``unled``), no ownership record names a live incarnation that does
  not own it (``orphaned``), and no node owns a partition whose record
  names another (``owned against its record``).
"""

from __future__ import annotations

import bisect
import functools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from epochgc.errors import EpochGCError, L0UnreadableError, LeaseLostError
from epochgc.leases.holder_codec import OwnerDocument, decode_owner, encode_owner
from epochgc.leases.node_lease import NodeLease, held_incarnation
from epochgc.leases.role_leases import LeaseManager
from epochgc.leases.timing import LeasePolicy
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.ownership.pacing import OwnershipPacing, stale_look_fraction
from epochgc.reconciler.leading_rules import idle_advance_due, step_down_reason, to_lead
from epochgc.reconciler.reconcile import Reconciler
from epochgc.reconciler.topics import epochgc_partitions
from epochgc.reconciler.watchdog import (
    OWNERSHIP_LOOP,
    ROUNDS_LOOP,
    LoopStall,
    ProgressWatchdog,
    round_bound_seconds,
)
from epochgc.runtime import Future, Runtime
from epochgc.simulate.collector_ghost import COLLECTOR, CollectorGhost
from epochgc.simulate.data_path import (
    APPEND_ANSWER_SECONDS,
    COLLECT_SECONDS,
    TICK_SECONDS,
    AppliedChunk,
    DataGhost,
    SimCollector,
    SimProducer,
)
from epochgc.simulate.fault_schedule import RECREATE_DELAY_SECONDS
from epochgc.simulate.operator import SimOperator
from epochgc.simulate.simulated_store import EPOCH_ORIGIN, Network, StoreView
from epochgc.simulate.topic_ghost import TopicGhost
from epochgc.simulate.virtual_time import Process, Scheduler
from epochgc.storage.keys import (
    PartitionId,
    controller_log_prefix,
    controller_snapshot_key,
    gc_control_key,
    owner_key,
    parse_log_entry_key,
    parse_partition_meta_key,
    partition_log_prefix,
)
from epochgc.storage.object_store import ObjectStore, get_or_none, head_or_none
from epochgc.watermarks.controller import Controller, ControllerView
from epochgc.watermarks.controller_codec import (
    EpochTick,
    decode_controller_entry,
    decode_controller_snapshot,
)
from epochgc.watermarks.partition.codec import decode_command
from epochgc.watermarks.partition.commands import AdvanceEpoch, Placeholders
from epochgc.watermarks.partition.state import Outcome
from epochgc.watermarks.partition.term_writer import TermWriter, start_leading
from epochgc.watermarks.safe_epoch.reports import (
    NodeReporter,
    SafeEpochRule,
    publish_report,
    safe_epoch_rule,
)
from epochgc.watermarks.ticker import EpochTicker

ROOT = "epochgc"
FOREIGN_OWNER = "operator"
"""The owner an outside writer names (no such node ever runs)."""
LEAD_INTERVAL_SECONDS = 1.0
RECONCILE_EVERY_TICKS = 4
"""A node reconciles its partitions and publishes its report every 4
leading ticks."""
IDLE_SECONDS = 10.0
"""A fully reconciled partition whose ``M(p)`` has not moved for this long
gets ``advance_epoch`` (``NodeSettings.idle_interval_seconds``)."""
RAISE_TERM_WAIT_SECONDS = 2.0
TICK_SPACING = TICK_SECONDS * (1 - 2 * 100e-6)
"""The least time between two ticks' sends: an interval by the clock of a
holder whose clock runs up to 100 ppm fast, the next holder waiting its
own interval from after the last one's grant had ended."""
UNLED_GRACE_SECONDS = 3.0
"""Beyond a round: the taker's leading step after its round took it."""
APPEND_DEPTH = 4
EXIT_RESTART_SECONDS = 5.0
"""How long after a node exits on its watchdog's verdict its supervisor
starts it again."""
TOPICS = ("orders", "clicks")
"""Created in this order at the start: revisions 1 and 2."""


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
    producers: int = 1
    collectors: int = 1
    safe_epoch_rule: SafeEpochRule = safe_epoch_rule
    """How the nodes' reports compute ``M(p)`` (another only to prove the
    invariants catch it)."""


class InjectedLoopFailure(RuntimeError):
    """What a ``hung_loop`` fault makes a loop die of."""


class SimNode:
    """One incarnation of a node id: a process, its runtime, its lease and
    ownership, and its loops."""

    def __init__(self, world: World, node_id: str, generation: int) -> None:
        self.world = world
        self.node_id = node_id
        self.process = Process(f"{node_id}#{generation}")
        self.runtime = world.runtime_for(self.process, wall_offset_seconds=2 * 86_400)
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
        self.writers: dict[PartitionId, TermWriter] = {}
        """The partitions led, each by the writer of its term."""
        self.controller = Controller(self.store, ROOT, runtime=self.runtime)
        self.reconciler = Reconciler(self.store, ROOT, max_records=50, fetch_concurrency=2)
        self.reporter = NodeReporter(self.store, ROOT, node_id, runtime=self.runtime)
        self.role_leases = LeaseManager(
            self.store, ROOT, node_id, policy=settings.policy, runtime=self.runtime
        )
        self.ticker = EpochTicker(
            self.role_leases,
            Controller(self.store, ROOT, runtime=self.runtime).tick,
            interval_seconds=TICK_SECONDS,
            poll_seconds=settings.policy.renew_interval_seconds,
            runtime=self.runtime,
        )
        self._moved_at: dict[PartitionId, tuple[int, float]] = {}
        # ``[reconciler] max_round_seconds`` unset: the bound the node
        # derives from its lease's TTL.
        self.watchdog = ProgressWatchdog(
            round_bound_seconds(0.0, settings.policy.ttl_seconds),
            bound_name="reconciler.max_round_seconds",
        )
        self.lease.set_renewal_gate(self._closed_by)
        self.hung: set[str] = set()
        """The loops a ``hung_loop`` fault stops for good (a call that
        never returns)."""
        self.failing: set[str] = set()
        """The loops a ``hung_loop`` fault makes die of an exception."""
        self.leaving = False
        self.view: ControllerView | None = None
        """The controller view the last leading step read."""
        self.live: frozenset[PartitionId] | None = None
        """The partitions of live epochgc topics, as of ``view`` (``None``
        until the first read: the ownership loop waits for it)."""

    def leads(self, pid: PartitionId) -> bool:
        """Leads ``pid`` at the term its ownership gives it now."""
        writer = self.writers.get(pid)
        return (
            writer is not None and not writer.is_broken and writer.term == self.ownership.term(pid)
        )

    def start(self) -> None:
        sched = self.world.sched
        self.watchdog.watch(
            ROUNDS_LOOP, self.runtime.monotonic(), allowance_seconds=LEAD_INTERVAL_SECONDS
        )
        sched.spawn(self.process, "heartbeat", self._heartbeat)
        sched.spawn(
            self.process,
            "ownership",
            functools.partial(self._watched, OWNERSHIP_LOOP, self._ownership_loop),
        )
        sched.spawn(
            self.process,
            "leading",
            functools.partial(self._watched, ROUNDS_LOOP, self._leading_loop),
        )
        sched.spawn(self.process, "start-ticker", self._start_ticker)
        sched.spawn(self.process, "supervisor", self._supervise)

    def _closed_by(self) -> str | None:
        """The renewal gate the node installs: closed once a loop is judged
        stopped."""
        stall = self.watchdog.check(self.runtime.monotonic())
        return None if stall is None else stall.describe()

    def _watched(self, loop: str, body: Callable[[], None]) -> None:
        """``ReconcilerNode._watched``: the exception a loop ends on, and
        its ending unasked, is its death. Only an injected failure is
        judged here; any other exception is a defect and ends the run."""
        try:
            body()
        except InjectedLoopFailure as err:
            self.watchdog.died(loop, err, self.runtime.monotonic())
            return
        if not self.leaving:
            self.watchdog.died(loop, "it ended without being asked to", self.runtime.monotonic())

    def _fault_point(self, loop: str) -> None:
        """Where a ``hung_loop`` fault strikes ``loop``: at the top of a
        round, it hangs for as long as the process lives, or dies."""
        if loop in self.failing:
            raise InjectedLoopFailure(f"loop {loop} fails (hung_loop)")
        if loop in self.hung:
            self.world.note(f"{self.process.name} loop {loop} hangs")
            while True:
                self.runtime.sleep(3600.0)

    def _supervise(self) -> None:
        """``ReconcilerNode.run``'s supervision: poll the watchdog; on a
        verdict let go (the lease first, then the leaders and the records)
        and exit, for the process's supervisor to start it again."""
        poll = max(0.01, min(0.5, self.watchdog.bound_seconds / 8))
        while not self.leaving:
            stall = self.watchdog.check(self.runtime.monotonic())
            if stall is not None:
                self._let_go(stall)
                return
            self.runtime.sleep(poll)

    def _let_go(self, stall: LoopStall) -> None:
        self.world.note(f"{self.process.name} {stall.describe()}; lets go and exits")
        try:
            self.lease.release()
        except EpochGCError as err:
            self.world.note(f"{self.process.name} lease release failed: {err}")
        self.writers.clear()
        try:
            self.ownership.stop(release=True)
        except EpochGCError as err:
            self.world.note(f"{self.process.name} records release failed: {err}")
        self.world.exited(self, EXIT_RESTART_SECONDS)

    def _start_ticker(self) -> None:
        """Every node may tick (``[epoch] ticker = true``): one holds the role."""
        self.role_leases.start()
        self.ticker.start()

    def _heartbeat(self) -> None:
        interval = max(0.05, self.lease.policy.renew_interval_seconds / 4)
        while not self.leaving:
            self.lease.renew_if_due()
            self.runtime.sleep(interval)

    def _ownership_loop(self) -> None:
        settings = self.world.settings
        pacing = OwnershipPacing(settings.round_seconds, stale_look_fraction(self.node_id))
        watched = False
        while not self.leaving:
            report = None
            if self.live is None:
                self.runtime.sleep(LEAD_INTERVAL_SECONDS)
                continue
            if not watched:  # judged once the first view gave it partitions to share
                self.watchdog.watch(
                    OWNERSHIP_LOOP,
                    self.runtime.monotonic(),
                    allowance_seconds=settings.round_seconds,
                )
                watched = True
            self._fault_point(OWNERSHIP_LOOP)
            try:
                if not self.lease.is_valid():
                    if not self.ownership.ensure_lease():
                        self.runtime.sleep(settings.round_seconds)
                        continue
                    self.world.note(f"{self.process.name} node lease {self.lease.incarnation}")
                    self.runtime.sleep(settings.round_seconds)
                report = self.ownership.run_round(self.live)
                if report.taken or report.taken_over or report.handed_back or report.lost:
                    self.world.note(
                        f"{self.process.name} round: took {report.taken}, took over "
                        f"{report.taken_over}, handed back {report.handed_back}, lost "
                        f"{report.lost}; owns {report.owned}"
                    )
            except EpochGCError as err:
                self.world.note(f"{self.process.name} ownership round failed: {err}")
            self.watchdog.completed(OWNERSHIP_LOOP, self.runtime.monotonic())
            stale_at = None if report is None else report.next_stale_at
            nodes = 0 if report is None else report.nodes
            self.runtime.sleep(pacing.after_round(self.runtime.monotonic(), stale_at, nodes))

    def _leading_loop(self) -> None:
        ticks = 0
        while not self.leaving:
            self._fault_point(ROUNDS_LOOP)
            ticks += 1
            fresh = self._read_view()
            live = self.live or frozenset()
            self._drop_lost(live)
            if fresh:
                for pid in sorted(to_lead(self.ownership.owned(), self.writers, live), key=str):
                    self._lead(pid)
            if ticks % RECONCILE_EVERY_TICKS == 0:
                self._duties(None if self.view is None else self.view.offset)
            self.watchdog.completed(ROUNDS_LOOP, self.runtime.monotonic())
            self.runtime.sleep(LEAD_INTERVAL_SECONDS)

    def _read_view(self) -> bool:
        """Catch up with the controller log, as every round of the node
        does: the live partitions are those of live epochgc topics. On a
        failed read the last view stands, and nothing new is led on it
        (its topic may be gone); whether the read succeeded."""
        try:
            view = self.controller.snapshot()
        except EpochGCError as err:
            self.world.note(f"{self.process.name} controller unreadable: {err}")
            return False
        self.view = view
        self.live = epochgc_partitions(view.topics)
        return True

    def _drop_lost(self, live: frozenset[PartitionId]) -> None:
        """Step down where the record no longer gives us the term we lead
        at, the writer failed (its term is spent: ``_lead`` raises), or the
        topic incarnation is no longer live."""
        for pid, writer in list(self.writers.items()):
            reason = step_down_reason(
                pid,
                led_term=writer.term,
                owned_term=self.ownership.term(pid),
                writer_open=not writer.is_broken,
                live=live,
            )
            if reason is not None:
                del self.writers[pid]
                self._moved_at.pop(pid, None)

    def _check_owned(self, pid: PartitionId, term: int) -> None:
        if self.ownership.term(pid) != term:
            raise LeaseLostError(f"{pid} is no longer owned by {self.node_id} at term {term}")

    def _lead(self, pid: PartitionId) -> None:
        term = self.ownership.term(pid)
        if term is None:
            return
        try:
            writer = start_leading(
                self.store,
                ROOT,
                pid,
                term,
                raise_term=functools.partial(
                    self.ownership.raise_term, pid, wait_seconds=RAISE_TERM_WAIT_SECONDS
                ),
                still_owned=functools.partial(self._check_owned, pid),
                depth=APPEND_DEPTH,
                runtime=self.runtime,
            )
        except EpochGCError as err:
            self.world.note(f"{self.process.name} could not lead {pid}: {err}")
            return
        if writer is None:
            return
        self.writers[pid] = writer
        self.world.note(f"{self.process.name} leads {pid} at term {writer.term}")

    def _duties(self, cluster_epoch: int | None) -> None:
        """Reconcile, keep idle partitions moving (``cluster_epoch``: the
        view's offset, when this step read it), publish the report."""
        for pid, writer in sorted(self.writers.items(), key=lambda item: str(item[0])):
            if writer.is_broken:
                continue
            try:
                self.reconciler.reconcile_once(writer)
                if cluster_epoch is not None:
                    self._housekeep(pid, writer, cluster_epoch)
            except L0UnreadableError as err:
                self.world.note(f"{self.process.name} {pid} stuck: {err}")
            except EpochGCError as err:
                self.world.note(f"{self.process.name} reconciling {pid} failed: {err}")
        led = [
            (pid, w.replica.state)
            for pid, w in sorted(self.writers.items(), key=lambda item: str(item[0]))
            if not w.is_broken
        ]
        try:
            # As the node's duties do (``NodeReporter``).
            report = self.reporter.next_report(
                self.runtime.wall(),
                led,
                self.live or frozenset(),
                incarnation=held_incarnation(self.lease),
                rule=self.world.settings.safe_epoch_rule,
            )
            if report is not None:
                publish_report(self.store, ROOT, report)
        except EpochGCError as err:
            self.world.note(f"{self.process.name} report not published: {err}")

    def _housekeep(self, pid: PartitionId, writer: TermWriter, cluster_epoch: int) -> None:
        state = writer.replica.state
        now = self.runtime.monotonic()
        last = self._moved_at.get(pid)
        if last is None or last[0] != state.safe_epoch:
            self._moved_at[pid] = (state.safe_epoch, now)
            return
        if idle_advance_due(
            state, idle_for=now - last[1], idle_seconds=IDLE_SECONDS, cluster_epoch=cluster_epoch
        ):
            writer.submit(AdvanceEpoch(0, 0, cluster_epoch)).result()
            self._moved_at[pid] = (state.safe_epoch, now)

    def serve_append(self, pid: PartitionId, command: Placeholders) -> Outcome | str:
        """A producer's request, in this process: submit the placeholder
        to the partition's writer and answer how replay applied it, or why
        it was not (a string)."""
        writer = self.writers.get(pid)
        if writer is None or not self.leads(pid):
            return "not the leader"
        try:
            entry = writer.submit(command).result()
        except EpochGCError as err:
            return f"failed: {err}"
        outcome = entry.result.outcome
        first = entry.result.first_record_offset
        if outcome is Outcome.APPLIED and first is not None:
            batch = command.batches[0]
            self.world.data.chunk_applied(
                AppliedChunk(pid, first, first + batch.records - 1, batch.l0_key, self.process.name)
            )
        return outcome

    def leave(self) -> None:
        """Stop cleanly: release every record and the lease (a task)."""
        self.leaving = True
        self.ticker.stop(release=True)
        self.role_leases.stop(release=True)
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
        self.root = ROOT
        self.nodes: dict[str, SimNode] = {}
        """The newest process of each node id."""
        self.extra: list[SimNode] = []
        """Older processes of a node id still running beside its newest
        (``duplicate``)."""
        self.generations: dict[str, int] = {}
        self._node_processes: set[Process | None] = set()
        self._owned_seen: dict[Process, frozenset[PartitionId]] = {}
        """Each live node process's ``owned()`` when ``check_safety`` last
        asked it (a superset of what it owns now); rebuilt at every check,
        so processes that died or were replaced drop out."""
        self.term_writers: dict[tuple[PartitionId, int], str] = {}
        """(partition, term) -> the process whose entries that term holds."""
        self.topics = TopicGhost(ROOT, Violation)
        self.controller_covered = 0
        """The highest offset a stored controller snapshot covers."""
        self._topic_reader = Controller(
            network.bucket,
            ROOT,
            runtime=Runtime(wall=self.sched_wall, request_pool=lambda _workers, _name: None),
        )
        """The product's controller view, read straight from the bucket (the
        ghost's: no request of a process) after every topic entry lands."""
        self.data = DataGhost(ROOT, Violation, ended=self.topics.is_ended)
        self.collector_ghost = CollectorGhost(ROOT, network.bucket, Violation)
        self._control_key = gc_control_key(ROOT)
        self._controller_prefix = controller_log_prefix(ROOT)
        self._controller_snapshot = controller_snapshot_key(ROOT)
        self._ticks: list[tuple[float, str]] = []
        """(virtual time sent, process) of every epoch tick that landed."""
        network.on_landed = self.landed
        network.controller_prefix = self._controller_prefix
        network.on_deleted = self._deleted
        network.on_landing = self.collector_ghost.request_landing
        network.on_deletion_answer_lost = self.collector_ghost.answer_lost
        self._create_topics()
        self.operator: SimOperator | None = None
        self.producer: SimProducer | None = None
        self.operator_pauses = 0
        self.topic_operators: dict[str, SimOperator] = {}
        self.overruled: dict[PartitionId, set[str]] = {}
        """Partitions an outside writer took from the processes named, which
        own them until they next read the record (up to 1.5 relist
        intervals): meanwhile a node may take it again, and only the
        partition log's term fence separates the two, so they are not
        counted as two owners."""

    # --- life cycle --------------------------------------------------------------

    def _create_topics(self) -> None:
        """The topics, created before any process starts (an operator's
        ``epochgc topic create``), at the revisions the settings name."""
        controller = Controller(self.network.bucket, ROOT, runtime=Runtime(wall=self.sched_wall))
        for name in TOPICS:
            wanted = {p for p in self.settings.partitions if p.topic == name}
            info = controller.create_topic(name, partitions=len(wanted))
            if set(info.partition_ids()) != wanted:
                raise ValueError(f"topic {name} was created as {info}, not as the settings say")
        for stored in self.network.bucket.list_objects(self._controller_prefix):
            if stored.key != self._controller_snapshot:
                self._controller_entry(
                    stored.key, self.network.bucket.get(stored.key).body, check=False
                )
        self.topics.check_view(self._topic_reader.snapshot())

    def runtime_for(self, process: Process, *, wall_offset_seconds: float) -> Runtime:
        """A process's runtime: its monotonic clock (own origin, drift up to
        100 ppm), its wall clock (up to ``wall_offset_seconds`` off), its
        locks, workers and ids in virtual time."""
        rng = self.rng
        sched = self.sched
        drift = 1.0 + rng.uniform(-100e-6, 100e-6)
        mono_base = rng.uniform(1_000.0, 1_000_000.0)
        wall_offset = rng.uniform(-wall_offset_seconds, wall_offset_seconds)
        started = sched.now

        def spawn(name: str, fn: Callable[[], None]) -> None:
            sched.spawn(process, name, fn)

        return Runtime(
            wall=lambda: EPOCH_ORIGIN + timedelta(seconds=wall_offset + sched.now * drift),
            monotonic=lambda: mono_base + (sched.now - started) * drift,
            sleep=sched.sleep,
            lock=sched.lock,
            request_pool=sched.pool,
            new_id=lambda: f"{rng.getrandbits(128):032x}",
            condition=sched.condition,  # type: ignore[arg-type]
            executor=lambda workers, name: sched.executor(process, workers, name),
            future=sched.future,
            spawn=spawn,
            unit_random=rng.random,
        )

    def start_data_path(self) -> None:
        """The producers and the collectors, each a process of its own whose
        wall clock is within a second of the store's, and the operator. A
        ``producer_stall`` stops the first producer."""

        def data_process(name: str) -> tuple[Runtime, ObjectStore, Process]:
            process = Process(name)
            runtime = self.runtime_for(process, wall_offset_seconds=1.0)
            return runtime, StoreView(self.network, name, process), process

        self.producer = SimProducer(self, *data_process("producer"))
        self.sched.spawn(self.producer.process, "producer", self.producer.run)
        collector = SimCollector(self, *data_process(COLLECTOR))
        self.sched.spawn(collector.process, COLLECTOR, collector.run)
        for number in range(2, self.settings.collectors + 1):
            # Out of phase with the first: a share of a round later.
            other = SimCollector(self, *data_process(f"{COLLECTOR}-{number}"))
            delay = self.rng.uniform(0.0, COLLECT_SECONDS)
            self.sched.spawn(other.process, other.process.name, other.run, delay=delay)
        for number in range(2, self.settings.producers + 1):
            more = SimProducer(self, *data_process(f"producer-{number}"))
            self.sched.spawn(more.process, more.process.name, more.run)
        process = Process("gc-operator")
        runtime = self.runtime_for(process, wall_offset_seconds=60.0)
        self.operator = SimOperator(
            self, runtime, StoreView(self.network, "gc-operator", process), process
        )

    def stall_producer(self, seconds: float) -> None:
        """The producer stops for ``seconds`` between its next upload and
        that batch's placeholders (``producer_stall``)."""
        assert self.producer is not None, "the data path starts at time 0, before any fault"
        self.producer.stall_after_next_upload(seconds)

    def operator_pause(self, seconds: float) -> None:
        """An operator pauses the collector for ``seconds`` (``operator_pause``)."""
        operator = self.operator
        assert operator is not None, "the data path starts at time 0, before any fault"
        self.operator_pauses += 1
        who = f"operator-{self.operator_pauses}"
        self.sched.spawn(operator.process, who, lambda: operator.pause_for(seconds, who))

    def operator_compaction(self) -> None:
        """An operator runs ``epochgc controller compact`` (``compaction``)."""
        operator = self._topic_operator("topic-operator")
        self.sched.spawn(operator.process, "controller-compact", operator.compact_controller)

    def topic_race(self, racer: str, pick: float, partitions: int) -> None:
        """``topic_race``: ``racer`` deletes a topic; just after it has read
        the view, another operator deletes and recreates the same topic
        with ``partitions`` partitions."""
        name = TOPICS[min(int(pick * len(TOPICS)), len(TOPICS) - 1)]
        racing = self._topic_operator(racer)
        recreating = self._topic_operator("topic-operator")
        self.sched.spawn(racing.process, racer, lambda: racing.delete_topic(name, racer))
        self.sched.spawn(
            recreating.process,
            f"recreate-{name}",
            lambda: recreating.recreate_topic(name, partitions, "topic-operator"),
            delay=RECREATE_DELAY_SECONDS,
        )

    def _topic_operator(self, name: str) -> SimOperator:
        """The operator process ``name`` (started at its first command)."""
        operator = self.topic_operators.get(name)
        if operator is None:
            process = Process(name)
            runtime = self.runtime_for(process, wall_offset_seconds=60.0)
            operator = SimOperator(self, runtime, StoreView(self.network, name, process), process)
            self.topic_operators[name] = operator
        return operator

    def append_at_leader(self, pid: PartitionId, command: Placeholders) -> Outcome | str:
        """A producer's request to the process leading ``pid`` (found the
        way the leader directory finds it: the live process leading it at
        the highest term); how the leader applied it, or why there is no
        answer (a string)."""
        leaders = [n for n in self.live_nodes() if n.leads(pid)]
        if not leaders:
            return "no leader"
        leader = max(leaders, key=lambda n: n.writers[pid].term)
        reply: Future[Outcome | str] = self.sched.future()
        self.sched.spawn(
            leader.process,
            f"append-{pid}",
            lambda: reply.set_result(leader.serve_append(pid, command)),
            delay=self.network.latency() / 2,
        )
        try:
            return reply.result(timeout=APPEND_ANSWER_SECONDS)
        except TimeoutError:
            return f"no answer from {leader.process.name}"

    def start_node(self, node_id: str) -> SimNode:
        generation = self.generations.get(node_id, 0) + 1
        self.generations[node_id] = generation
        node = SimNode(self, node_id, generation)
        self.nodes[node_id] = node
        self.network.nodes.add(node_id)
        self._node_processes.add(node.process)
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

    def exited(self, node: SimNode, restart_after: float) -> None:
        """``node``'s process exits on its own (its watchdog's verdict);
        started again ``restart_after`` seconds later when it is still its
        node id's newest process."""
        self.note(f"{node.process.name} exited; restarts in {restart_after:.1f}s")
        self.sched.at(self.sched.now, lambda: self.sched.kill(node.process))
        if self.nodes.get(node.node_id) is node:
            self.sched.at(self.sched.now + restart_after, lambda: self._restart(node.node_id))

    def hang(self, node_id: str, loop: str, *, fail: bool) -> None:
        """``node_id``'s ``loop`` (``rounds`` or ``ownership``) hangs at its
        next round, for good, or (``fail``) dies there (``hung_loop``)."""
        node = self.nodes.get(node_id)
        if node is not None and node.process.alive and not node.leaving:
            (node.failing if fail else node.hung).add(loop)
            self.note(f"{node.process.name} loop {loop} will {'fail' if fail else 'hang'}")

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

    def restart(self, node_id: str, down_seconds: float) -> None:
        """Stop ``node_id`` cleanly (as ``leave``: its records and lease
        released), end its process, and start it again ``down_seconds``
        later (a rolling deploy)."""
        node = self.nodes.get(node_id)
        if node is None or not node.process.alive or node.leaving:
            return

        def stop() -> None:
            node.leave()
            self.note(f"{node.process.name} stopped; starts again in {down_seconds:.1f}s")
            self.sched.at(self.sched.now, lambda: self.sched.kill(node.process))
            self.sched.at(self.sched.now + down_seconds, lambda: self._start_again(node))

        self.sched.spawn(node.process, "restart", stop)

    def _start_again(self, node: SimNode) -> None:
        if self.nodes.get(node.node_id) is node:
            self.start_node(node.node_id)

    def rewrite_owner(self, pick: float) -> None:
        """An outside writer (a restored backup, a hand-made edit) names a
        node that does not exist as the owner of one partition, five terms
        up (the record as ``OwnershipStore`` writes it). Naming a live
        node's current incarnation is left out: only a protocol
        participant knows it, and a node never reads a record outside its
        share that it did not write."""
        partitions = self.topics.live_partitions()
        if not partitions:
            self.note("outside writer: no live partition to rewrite")
            return
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

    def landed(self, key: str, body: bytes, writer: str) -> None:
        """Every write that reached the bucket: a partition log's entries of
        one term all come from one process; an L1 object makes its
        records durable."""
        self.data.landed(key)
        if key == self._control_key:
            self.collector_ghost.control_landed(body, self.sched.now)
            return
        if key == self._controller_snapshot:
            covered = decode_controller_snapshot(body).offset
            self.controller_covered = max(self.controller_covered, covered)
            return
        if key.startswith(self._controller_prefix):
            if self._controller_entry(key, body):
                self._tick_sent(self.network.landing_sent, writer)
            return
        pid = parse_partition_meta_key(key, ROOT)
        if pid is not None and key.startswith(partition_log_prefix(ROOT, pid)):
            term = decode_command(body).term
            first = self.term_writers.setdefault((pid, term), writer)
            if first != writer:
                raise Violation(
                    "two leaders in one term",
                    f"{pid} term {term}: entries of {first} and {writer}",
                )

    def _controller_entry(self, key: str, body: bytes, *, check: bool = True) -> bool:
        """A controller entry landed: a topic entry goes to the topic
        ghost, which then judges the product's view (with ``check``);
        whether it was an epoch tick that counts. An entry landing in a
        slot a stored snapshot covers (a late write into a slot compaction
        truncated) counts for nothing: no reader ever folds it."""
        offset = parse_log_entry_key(key, self._controller_prefix)
        if offset is None:
            return False
        if offset <= self.controller_covered:
            self.note(f"controller entry {offset} landed in a truncated slot: void")
            return False
        entry = decode_controller_entry(body)
        if self.topics.entry_landed(offset, entry) and check:
            self.topics.check_view(self._topic_reader.snapshot())
        return isinstance(entry, EpochTick)

    def _tick_sent(self, sent: float, writer: str) -> None:
        """An ``epoch_tick`` landed, sent at ``sent``: ticks are at least an
        interval apart (``TICK_SPACING``), whichever process sent them."""
        at = bisect.bisect_left(self._ticks, (sent, writer))
        for other, by in self._ticks[max(0, at - 1) : at + 1]:
            if abs(sent - other) < TICK_SPACING:
                raise Violation(
                    "ticks too close",
                    f"{writer} sent an epoch tick at {sent:.3f}, {abs(sent - other):.3f} s "
                    f"from {by}'s at {other:.3f} (the interval is {TICK_SECONDS:.0f} s)",
                )
        self._ticks.insert(at, (sent, writer))

    def _deleted(self, keys: tuple[str, ...], by: str) -> None:
        self.topics.deleted(keys, by)
        self.data.deleted(keys, by)
        self.collector_ghost.deleted(keys, by)

    def check_safety(self) -> None:
        """After every event: no partition in two live nodes' ``owned()``
        (but see ``overruled``).

        Only an event that ran a node's task can break it: a node's
        ``owned()`` grows only in its own tasks (a take, a renewal that
        made the lease valid again); a request landing, the passing of
        time or another process's step can only shrink it. So the other
        events are skipped (a third of a run's events), and only the node
        that ran is asked again: every other node's last answer holds at
        least what it owns now, so no overlap among those answers means
        none now. An overlap found that way is checked against fresh
        answers before it counts. The holders ``overruled`` exempts are
        always asked afresh, so its pruning sees what they own now."""
        ran = self.sched.ran
        if ran not in self._node_processes:
            return
        exempt: set[str] = set().union(*self.overruled.values())
        seen, self._owned_seen = self._owned_seen, {}
        alive: list[tuple[SimNode, frozenset[PartitionId]]] = []
        for node in self.processes():
            process = node.process
            if not process.alive:
                continue
            owned = seen.get(process)
            if owned is None or process is ran or process.name in exempt:
                owned = node.ownership.owned()
            self._owned_seen[process] = owned
            alive.append((node, owned))
        for pid in list(self.overruled):
            holders = self.overruled[pid]
            holders.intersection_update(n.process.name for n, owned in alive if pid in owned)
            if not holders:
                del self.overruled[pid]  # it only shrinks: nobody is left to exempt
        if self.two_owners(alive) is None:
            return
        fresh = [(node, node.ownership.owned()) for node, _ in alive]
        self._owned_seen.update((node.process, owned) for node, owned in fresh)
        found = self.two_owners(fresh)
        if found is not None:
            raise Violation("two owners", found)

    def two_owners(self, alive: list[tuple[SimNode, frozenset[PartitionId]]]) -> str | None:
        """The first partition two of ``alive`` own, in words, or ``None``.

        A partition of an incarnation a delete has ended is left out: the
        janitor then removes its ownership records, and a node whose view
        is older than the delete may take it again while its last holder
        has not yet read the view that drops it. Nothing of a deleted
        incarnation is kept (its records are not promised to readers) and
        ``M`` is the least over live partitions, so two holders there break
        nothing."""
        owners: dict[PartitionId, str] = {}
        for node, owned in alive:
            for pid in owned:
                if node.process.name in self.overruled.get(pid, ()) or self.topics.is_ended(pid):
                    continue
                other = owners.setdefault(pid, node.process.name)
                if other != node.process.name:
                    return f"{pid} is owned by {other} and {node.process.name} at once"
        return None

    def check_liveness(self) -> None:
        """After the heal phase: every partition owned and led, no record
        naming a live incarnation that does not own it.

        A partition may be between owners at that instant: a balancing
        hand-back (a node that joined takes its share) leaves it unled
        until the taker's next round. So an unled partition is looked at
        once more a round and a leading step later (``UNLED_GRACE_SECONDS``), and
        only one still unled then breaks the invariant."""
        bucket = self.network.bucket
        live = self.live_nodes()
        unled: list[PartitionId] = []
        for pid in self.topics.live_partitions():
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
            if not [n for n in live if n.leads(pid)]:
                unled.append(pid)
        if unled:
            grace = self.settings.round_seconds + UNLED_GRACE_SECONDS
            self.sched.at(self.sched.now + grace, lambda: self._still_unled(unled, grace))

    def _still_unled(self, unled: list[PartitionId], grace: float) -> None:
        live = self.live_nodes()
        for pid in unled:
            if not [n for n in live if n.leads(pid)]:
                raise Violation(
                    "unled",
                    f"{pid} is led by no live node after the heal phase, nor {grace:.0f} s later",
                )

    def data_faults_end(self) -> None:
        """The faults stop: note the cluster epoch ``M`` must pass."""
        self.data.faults_ended(Controller(self.network.bucket, ROOT).current_epoch())

    def check_data_liveness(self) -> None:
        """At the end: nothing applied lost, ``M`` past the epoch of the
        faults' end, nothing the collector was allowed to delete left."""
        bucket = self.network.bucket
        self.data.check_readable(lambda key: head_or_none(bucket, key) is not None)
        self.data.check_collected(bucket, self.sched.now)
