"""What an ``epochgc verify`` run does to the product while it runs: the
disturbances of its disturbed phase, each one object behind one small
interface (``Disturbance``), so that a new fault is one class here and one
line in ``run.py``.

``disturb`` runs the phase in rounds a few seconds apart: in each round
every disturbance takes its ``step`` in turn (one may block while it
lasts; the others wait, so an operator pause never overlaps a stopped
process), and when the phase is over each one's ``settle`` finishes and
judges what it left in flight. The topic churn (``churn.py``) is not one
of them: it runs in a thread of its own beside the rounds.

Each disturbance draws only from a random stream of its own, derived from
the run's seed and its name (``stream_of``), and draws a round's decision
whole before acting on any of it. Adding, removing or changing one
disturbance therefore leaves every other one's decisions, and so a seed's
schedule of them, as they were. The process faults are the one stream not
derived by name: they draw from the run's own stream, ``random.Random(seed)``,
which also paces the rounds, because they were the first disturbance and
every seed's schedule of them predates the others.
"""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Protocol

from epochgc.errors import EpochGCError
from epochgc.gc.control import pause, resume
from epochgc.storage.object_store import ObjectStore
from epochgc.verify.processes import Processes, start_spark_job
from epochgc.verify.result import VerifyResult
from epochgc.verify.run_config import LEASE_TTL, ROOT
from epochgc.verify.switches import set_stall_switch, stall_switch

log = logging.getLogger(__name__)


def stream_of(seed: int, name: str) -> random.Random:
    """The random stream of the disturbance called ``name`` in the run of
    ``seed``: the same for the same two, and its own, whichever other
    disturbances run beside it."""
    return random.Random(f"{name}-{seed}")


class Disturbance(Protocol):
    """One kind of fault of the disturbed phase."""

    def step(self, elapsed: float) -> None:
        """This round's chance to disturb, ``elapsed`` seconds into the
        phase; may block while the disturbance lasts."""

    def settle(self) -> None:
        """The phase is over: finish what is still in flight and judge it."""


def disturb(
    disturbances: Sequence[Disturbance], duration: float, pace: Callable[[], float]
) -> None:
    """The disturbed phase: for ``duration`` seconds, rounds ``pace()``
    seconds apart, each giving every disturbance its step in the order
    given; then each settles, in the same order."""
    started = time.monotonic()
    while time.monotonic() - started < duration:
        time.sleep(pace())
        for disturbance in disturbances:
            disturbance.step(time.monotonic() - started)
    for disturbance in disturbances:
        disturbance.settle()


class DaysOffClocks:
    """A restarted daemon's clock offset: now and then days ahead (it writes
    times from the future into shared documents, which must not stop the
    others) or days behind (it must delete nothing sooner); 0 otherwise.
    Not a turn of its own: the process faults ask it for the clock of each
    restart whose clock they do not set minutes off themselves."""

    NAME: ClassVar[str] = "clock"

    def __init__(self, seed: int, result: VerifyResult) -> None:
        self._rng = stream_of(seed, self.NAME)
        self._result = result

    def offset(self, role: str) -> float:
        """Seconds to set the clock of a restarted ``role`` off by."""
        if role != "daemon" or self._rng.random() >= 0.4:
            return 0.0
        skew = self._rng.choice([-1, 1]) * self._rng.uniform(2, 5) * 86400
        self._result.process_faults[f"clock_days_{'ahead' if skew > 0 else 'behind'}_daemon"] += 1
        return skew


@dataclass(frozen=True)
class ProcessFault:
    """One round's process fault, drawn whole before any of it is done."""

    ident: str
    action: str
    """``kill`` (-9, then a restart), ``pause`` (SIGSTOP past the lease
    TTL), ``leave`` (a clean stop, then a join) or ``nothing``."""
    wait: float = 0.0
    """Seconds down before the restart (kill, leave), or stopped beyond
    the lease TTL (pause)."""
    clock_skew: float = 0.0
    """The restarted process's clock offset, in seconds."""
    minutes_off: bool = False
    """The offset is one of minutes, drawn here (else the days-off clocks')."""


class ProcessFaults:
    """Each round, one worker process (node or daemon) is killed with
    ``kill -9`` and restarted a moment later (30% of restarts with the
    clock 30-120 s off), stopped with SIGSTOP past the lease TTL (its
    leases expire and are taken over; it wakes up fenced), or leaves
    cleanly (SIGTERM) and joins again a moment later, or nothing happens.

    Its stream is the run's own (``random.Random(seed)``), from which
    ``pace`` also draws the wait before each round: so every seed's
    schedule of process faults is the one it had before the other
    disturbances came."""

    def __init__(
        self, procs: Processes, seed: int, restart_clocks: DaysOffClocks, result: VerifyResult
    ) -> None:
        self._procs = procs
        self._rng = random.Random(seed)
        self._restart_clocks = restart_clocks
        self._result = result

    def pace(self) -> float:
        """Seconds to wait before the next round of disturbances."""
        return self._rng.uniform(1.5, 3.5)

    def next_fault(self, roles: Mapping[str, str]) -> ProcessFault:
        """This round's fault, for one of the processes in ``roles`` (id ->
        role)."""
        ident = self._rng.choice(sorted(roles))
        action = self._rng.choice(["kill", "pause", "nothing", "leave"])
        if action == "leave":
            wait = self._rng.uniform(0.5, 2.5)
            return ProcessFault(ident, action, wait, self._restart_clocks.offset(roles[ident]))
        if action == "kill":
            wait = self._rng.uniform(0.2, 1.0)
            if self._rng.random() < 0.3:  # restart it with its clock minutes off
                skew = self._rng.choice([-1, 1]) * self._rng.uniform(30, 120)
                return ProcessFault(ident, action, wait, skew, minutes_off=True)
            return ProcessFault(ident, action, wait, self._restart_clocks.offset(roles[ident]))
        if action == "pause":
            return ProcessFault(ident, action, self._rng.uniform(0.5, 1.5))
        return ProcessFault(ident, action)

    def step(self, elapsed: float) -> None:
        procs, counts = self._procs, self._result.process_faults
        fault = self.next_fault(procs.roles)
        ident, role = fault.ident, procs.roles[fault.ident]
        if fault.action == "leave":
            # The node (or daemon) leaves cleanly, the others take its
            # partitions (roles) at once, and it joins again a moment later:
            # a join that takes its share back by hand-back.
            procs.terminate(ident)
            counts[f"leave_{role}"] += 1
            time.sleep(fault.wait)
            procs.start(ident, role, fault.clock_skew)
            counts[f"join_{role}"] += 1
        elif fault.action == "kill":
            procs.kill(ident)
            counts[f"kill_{role}"] += 1
            time.sleep(fault.wait)
            if fault.minutes_off:
                counts[f"clock_skew_{role}"] += 1
            procs.start(ident, role, fault.clock_skew)
        elif fault.action == "pause":
            proc = procs.procs[ident]
            proc.send_signal(signal.SIGSTOP)
            time.sleep(LEASE_TTL + fault.wait)
            proc.send_signal(signal.SIGCONT)
            counts[f"pause_past_ttl_{role}"] += 1

    def settle(self) -> None:
        """Nothing in flight: every fault ends within its step."""


class OperatorPauses:
    """An operator pausing the collectors (``gc pause``) now and then, for
    2 to 4 s, between the other disturbances (never while a process is
    stopped, so no check-then-delete is frozen across the window). The
    daemons compact every 3 s and tidy every 2 s in a verify run, so their
    controller truncation, janitor and tidying fall due while paused;
    check (f) fails the run if any collector delete is logged inside a
    window (after ``checks.PAUSE_GRACE_SECONDS``)."""

    NAME: ClassVar[str] = "pause"

    def __init__(self, store: ObjectStore, seed: int, result: VerifyResult) -> None:
        self._store = store
        self._rng = stream_of(seed, self.NAME)
        self._result = result

    def next_hold(self) -> float | None:
        """How long this round's pause holds, in seconds; ``None`` for no
        pause this round."""
        if self._rng.random() >= 0.25:
            return None
        return self._rng.uniform(2.0, 4.0)

    def step(self, elapsed: float) -> None:
        hold = self.next_hold()
        if hold is None:
            return
        try:
            pause(self._store, ROOT, by="verify", reason="looking", now=datetime.now(UTC))
        except EpochGCError as err:
            log.warning("pausing the collectors failed: %s", err)
            return
        start = time.time()
        try:
            time.sleep(hold)
        finally:
            end = time.time()
            self._resume()
        self._result.paused.append((start, end))
        self._result.process_faults["operator_pause"] += 1

    def settle(self) -> None:
        """Nothing in flight: every pause is resumed within its step."""

    def _resume(self) -> None:
        for _ in range(10):
            try:
                resume(self._store, ROOT, by="verify", now=datetime.now(UTC))
                return
            except EpochGCError as err:
                log.warning("resuming the collectors failed (retrying): %s", err)
                time.sleep(0.5)
        self._result.violations.append("verify itself: could not resume the collectors")


STALL_EXIT_SECONDS = 6 * LEASE_TTL + 15.0
"""How long a node with a stalled loop may take to exit: its round bound
(``reconciler.max_round_seconds``: four lease TTLs), letting go (one TTL),
a pause between rounds, and room for a busy machine."""


@dataclass(frozen=True)
class LoopStall:
    """One node's loop made to stall: ``mode`` ``hang`` or ``fail``, ``loop``
    ``rounds`` or ``ownership``."""

    ident: str
    mode: str
    loop: str


class LoopStalls:
    """Now and then one node's rounds or ownership loop hangs or dies (the
    worker's ``stall-{id}`` switch: its store hangs or raises a bug's error
    for that loop's requests, while the lease heartbeat goes on). The node
    must stop renewing, let go, say which loop stopped and exit 1 within
    ``STALL_EXIT_SECONDS``; verify then restarts it, as a supervisor would.
    Check (g) fails the run otherwise; the record checks (a)-(d) hold as
    ever (its peers take its partitions over)."""

    NAME: ClassVar[str] = "stall"

    def __init__(self, procs: Processes, folder: Path, seed: int, result: VerifyResult) -> None:
        self._procs = procs
        self._folder = folder
        self._rng = stream_of(seed, self.NAME)
        self._result = result
        self._pending: list[tuple[LoopStall, subprocess.Popen[bytes], float]] = []

    def next_stall(self, nodes: Sequence[str]) -> LoopStall | None:
        """This round's stall, of one of ``nodes``, or ``None``; drawn only
        in a round with no stall pending."""
        if self._rng.random() >= 0.15:
            return None
        ident = self._rng.choice(nodes)
        mode, loop = self._rng.choice(["hang", "fail"]), self._rng.choice(["rounds", "ownership"])
        return LoopStall(ident, mode, loop)

    def step(self, elapsed: float) -> None:
        self._restart_exited()
        if self._pending:
            return
        procs = self._procs
        stall = self.next_stall(sorted(i for i, r in procs.roles.items() if r == "node"))
        if stall is None or procs.procs[stall.ident].poll() is not None:
            return
        set_stall_switch(self._folder, stall.ident, f"{stall.mode} {stall.loop}")
        self._pending.append((stall, procs.procs[stall.ident], time.monotonic()))
        self._result.process_faults[f"{stall.mode}_{stall.loop}_loop_node"] += 1

    def settle(self) -> None:
        """Wait for each stalled node up to its deadline, then judge it."""
        self._restart_exited(wait=True)

    def _restart_exited(self, *, wait: bool = False) -> None:
        """Restart every stalled node that exited; flag one that did not in
        time (with ``wait``, wait for each up to its deadline)."""
        procs = self._procs
        for item in list(self._pending):
            stall, proc, since = item
            ident, mode, loop = stall.ident, stall.mode, stall.loop
            if procs.procs.get(ident) is not proc:
                # Killed or stopped and restarted meanwhile: nothing to judge.
                self._pending.remove(item)
                stall_switch(self._folder, ident).unlink(missing_ok=True)
                continue
            deadline = since + STALL_EXIT_SECONDS
            if wait:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            code = proc.poll()
            if code is None and time.monotonic() < deadline:
                continue
            self._pending.remove(item)
            what = f"(g) {ident}, its {loop} loop {'hung' if mode == 'hang' else 'failing'},"
            if code is None:
                self._result.violations.append(
                    f"{what} did not exit within {STALL_EXIT_SECONDS:.0f} s"
                )
                procs.kill(ident)
            elif code != 1:
                self._result.violations.append(f"{what} exited with {code}, not 1")
            elif f"loop {loop} stopped" not in _log_tail(self._folder / f"{ident}.log"):
                self._result.violations.append(f"{what} exited without naming the loop")
            procs.start(ident, "node")


def _log_tail(path: Path, size: int = 65536) -> str:
    """The last ``size`` bytes of a worker's log, as text ("" if unreadable)."""
    try:
        with path.open("rb") as file:
            file.seek(max(0, path.stat().st_size - size))
            return file.read().decode("utf-8", "replace")
    except OSError:
        return ""


class SparkJobMidway:
    """With ``--spark``: a Spark GC job (``gc spark`` on a local Spark)
    started half-way through the phase, beside the daemons, and never
    disturbed itself. When the phase is over it is waited for (up to
    300 s); a crash (an exit other than 0 or 1) fails the run."""

    def __init__(
        self, procs: Processes, config: Path, folder: Path, duration: float, result: VerifyResult
    ) -> None:
        self._procs = procs
        self._config = config
        self._folder = folder
        self._duration = duration
        self._result = result
        self._proc: subprocess.Popen[bytes] | None = None

    def step(self, elapsed: float) -> None:
        if self._proc is None and elapsed > self._duration / 2:
            self._proc = start_spark_job(self._config, self._folder)
            self._procs.adopt(self._proc)
            self._result.process_faults["spark_job"] += 1

    def settle(self) -> None:
        if self._proc is None:
            return
        self._proc.wait(timeout=300)
        if self._proc.returncode not in (0, 1):
            self._result.violations.append(f"the Spark job crashed (exit {self._proc.returncode})")
