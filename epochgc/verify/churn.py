"""Topic churn under an ``epochgc verify`` run: the ``churn`` topic
deleted and created again under the same name while producers write to it
and its reconcilers are behind, now and then by two operators racing each
other, and the controller log compacted at random moments.

A recreated topic must start empty and lose nothing of its own, whatever
the deleted incarnation left in flight. The churn runs in a thread of
its own, beside the disturbances that take turns in the driver's loop,
and judges check (e) itself: only it knows which revision each of its
deletes named.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from epochgc.errors import EpochGCError
from epochgc.storage.keys import PartitionId, controller_log_prefix
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.s3 import S3ObjectStore
from epochgc.verify.disturbances import stream_of
from epochgc.verify.faults import HeldWrites
from epochgc.verify.result import VerifyResult
from epochgc.verify.run_config import ROOT
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.replica import PartitionReplica

log = logging.getLogger(__name__)

CHURN = "churn"
"""The topic the churn deletes and recreates; the others keep their
whole history, so a run has both long-lived partitions and fresh ones."""
CHURN_PARTITIONS = 2


@dataclass(frozen=True)
class ChurnRound:
    """One delete-and-recreate of ``CHURN``, as the churn's stream draws it."""

    wait: float
    """Seconds to wait for this round, from the previous one (or the start)."""
    lag_before: float
    """Seconds the reconcilers are held back before the delete."""
    lag_after: float
    """... and after the create."""
    ticks: int
    """Epoch ticks between the delete and the create."""
    compact: bool
    """Compact the controller log after the create."""
    race: bool
    """A second operator recreates the topic at the same moment."""


class Churn:
    """Deletes ``CHURN`` and creates it again under the same name, at
    random moments of the disturbed phase (every 3 to 7 seconds), on the
    clean store: the controller is an operator here, not a faulty process.

    The nodes keep producing to it throughout; from a moment before the
    delete until a moment after the create, the ``reconcile-lag`` switch
    slows every L1 write, so the reconcilers (of every topic) fall behind
    and the deleted incarnation has placeholders no reconciler will ever
    get to (counted at each delete): exactly what made a recreated topic
    inherit the old log, whose L0 objects the collector then deleted, when
    partitions were keyed by name alone. The new incarnation comes at once
    (a node may never see the topic gone) or after an epoch tick or two
    (the collector may run with the topic absent).

    Half the recreates race a second operator doing the same at the same
    moment: it reads the incarnation live, its delete's PUT is held while
    the first operator deletes and recreates the topic, and it lands late
    (after a lost slot and its back-off). Every delete's own entry offset and the revision it named
    are kept; the end check holds every ended incarnation against them, so
    a delete that ended an incarnation it did not name is a violation.
    """

    NAME: ClassVar[str] = "churn"

    def __init__(self, store: ObjectStore, folder: Path, seed: int, duration: float) -> None:
        self._store = store
        self._lag_switch = folder / "reconcile-lag"
        self._controller = Controller(store, ROOT)
        self._late_store = HeldWrites(store, controller_log_prefix(ROOT))
        self._late_operator = Controller(self._late_store, ROOT)
        self.named_deletes: dict[int, int] = {}
        """Offset of each delete's own entry -> the revision it named."""
        self.raced = 0
        self._rng = stream_of(seed, self.NAME)
        self._duration = duration
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name="verify-churn")
        self.recreated = 0
        self.compacted = 0
        self.unreconciled = 0
        self.crashed: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def finish(self, result: VerifyResult) -> None:
        """Stop (a recreate in progress completes) and count into ``result``."""
        self._stop.set()
        self._thread.join()
        result.process_faults["recreate"] += self.recreated
        result.process_faults["compact"] += self.compacted
        result.process_faults["operators_racing"] += self.raced
        result.unreconciled_at_delete += self.unreconciled
        if self.crashed is not None:
            result.violations.append(f"verify itself: the churn thread crashed: {self.crashed!r}")

    def next_round(self) -> ChurnRound:
        """The next recreate, drawn whole before any of it is done."""
        wait = self._rng.uniform(3.0, 7.0)
        lag_before, lag_after = self._rng.uniform(1.0, 2.5), self._rng.uniform(0.0, 1.0)
        ticks = self._rng.choice([0, 0, 1, 2])
        compact = self._rng.random() < 0.5
        race = self._rng.random() < 0.5
        return ChurnRound(wait, lag_before, lag_after, ticks, compact, race)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            while True:
                # All drawn first: the schedule is the seed's whatever fails.
                churn = self.next_round()
                if self._stop.wait(churn.wait) or time.monotonic() - started > self._duration:
                    return
                self._lag_switch.touch()
                try:
                    time.sleep(churn.lag_before)  # placeholders pile up unreconciled
                    if churn.race:
                        self._race()
                    else:
                        self._recreate(self._controller, churn.ticks)
                    if churn.compact:
                        self._compact()
                    time.sleep(churn.lag_after)
                finally:
                    self._lag_switch.unlink(missing_ok=True)
        except Exception as err:  # a bug of this harness: say so, never hide it
            log.exception("the churn thread crashed")
            self.crashed = err

    def _race(self) -> None:
        """Two operators recreate ``CHURN`` at once: the late one reads the
        live incarnation and its delete's PUT is held until the other has
        deleted and recreated the topic, so it lands after the create."""
        self._late_store.arm()
        late = threading.Thread(
            target=self._recreate, args=(self._late_operator, 0), name="verify-operator-2"
        )
        late.start()
        try:
            if self._late_store.held.wait(30.0):  # it read the controller; its PUT waits
                self._recreate(self._controller, 0)
                self.raced += 1
        finally:
            self._late_store.release()
            late.join()

    def _recreate(self, controller: Controller, ticks: int) -> None:
        """Delete (if live), wait ``ticks`` epoch intervals, create. A step
        that fails is logged; the next recreate finishes the job."""
        try:
            old = controller.snapshot().topics.get(CHURN)
            if old is not None:
                outcome = controller.delete_topic(CHURN)
                behind = self._unreconciled(old.partition_ids())
                with self._lock:
                    self.named_deletes[outcome.entry_offset] = outcome.revision
                    self.unreconciled += behind
                log.info("%s, %d records unreconciled", outcome.describe(), behind)
                time.sleep(ticks * 1.0)  # [epoch] interval_seconds: about one tick each
            info = controller.create_topic(CHURN, CHURN_PARTITIONS)
        except EpochGCError as err:
            log.warning("recreating %s did not finish (the next one will): %s", CHURN, err)
            return
        log.info("recreated %s at revision %d after %d ticks", CHURN, info.revision, ticks)
        with self._lock:
            self.recreated += 1

    def check(self, store: S3ObjectStore, result: VerifyResult) -> None:
        """Every ended incarnation of ``CHURN`` was ended by a delete that
        named it (among the deletes whose outcome came back)."""
        deleted = Controller(store, ROOT).snapshot().deleted
        for (name, revision), gone in sorted(deleted.items()):
            named = self.named_deletes.get(gone.deleted_at)
            if name == CHURN and named is not None and named != revision:
                result.violations.append(
                    f"(e) {name}@{revision} was ended at offset {gone.deleted_at} by a delete "
                    f"that named {name}@{named}"
                )

    def _compact(self) -> None:
        """Compact the controller log now, racing the daemons' own
        compactions and every reader opening it."""
        try:
            done = self._controller.compact(min_entries=1)
        except EpochGCError as err:
            log.warning("compacting the controller did not finish: %s", err)
            return
        log.info("compacted the controller: %s", done)
        self.compacted += 1

    def _unreconciled(self, pids: list[PartitionId]) -> int:
        """Records of a just-deleted incarnation that are not in L1 (the
        data in flight a recreate must not inherit); best effort."""
        total = 0
        for pid in pids:
            try:
                state = PartitionReplica(self._store, ROOT, pid).open()
            except EpochGCError:
                continue
            total += state.next_offset - 1 - state.lro
        return total
