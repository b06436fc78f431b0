"""``epochgc verify``: a randomized end-to-end run under faults, then the
safety checks. "Never too soon, not much too late", checked.

The run (everything drawn from ``--seed``): the embedded S3 in this
process; two reconciler nodes (each with producers writing to the
partitions it leads) and two GC daemons as separate processes, all behind a
``FaultyStore`` (failed requests, SlowDown, lost answers of applied
requests, latency, partial DeleteObjects); process faults from here:
``kill -9`` of a node or daemon (restarted a moment later), a clean leave
(SIGTERM: a node releases its ownership records and node lease) and a join
a moment later (the node takes its share back by hand-back), and ``SIGSTOP``
past the lease TTL (leases expire and are taken over, then the process
wakes up fenced); deleting the ``churn`` topic while producers write to it
and its reconcilers are behind, then creating it again under the same name
(at once or an epoch tick or two later: a new incarnation, which must start
empty and lose nothing of its own); optionally a Spark GC job mid-way.
Meanwhile this process samples ``M`` every half second, on a clean store,
twice: as published (the join of the node reports the collectors use) and as
the partition logs give it (``truth.py``: the state every ``M(p)`` derives
from, which a broken build's reports cannot fake).

Then it quiesces (faults off, producers off, wait for the reconcilers to
catch up and the collectors to delete everything they may) and checks:

(a) every record acknowledged to a live topic incarnation reads back at
    its offset, byte for byte (records acknowledged to a deleted incarnation
    went with it and are only counted); acknowledged offsets are distinct
    (payloads duplicated at other, unacknowledged offsets by at-least-once
    replays are counted); every live incarnation's records start at offset
    0 and hold nothing produced to another incarnation of its name;
(b) no deletion came before its time: every key a collector sent to
    DeleteObjects had an epoch at or below the logs' ``M`` of that moment;
    and the published ``M`` was never above the logs' ``M`` read just
    after it (an unsafe ``M`` is caught even when nothing was lost to it);
(c) after quiesce, no L0 object with epoch <= ``M`` is left, and every live
    partition's ``M(p)`` reached the epoch at which the producers stopped
    (a partition stuck behind, e.g. on an L0 object deleted under it, is
    named);
(d) ``M`` never decreased, for this process's samples and for each daemon.

Exit 1 on any violation, with the seed to reproduce it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from epochgc.config import load_config
from epochgc.errors import EpochGCError
from epochgc.gc.control import pause, resume
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.s3 import S3ObjectStore
from epochgc.verify.checks import check_outcome, quiesce
from epochgc.verify.churn import CHURN, CHURN_PARTITIONS, Churn
from epochgc.verify.processes import Processes, start_spark_job
from epochgc.verify.result import VerifyResult
from epochgc.verify.run_config import LEASE_TTL, ROOT, config_text
from epochgc.verify.run_folder import fresh_run_folder
from epochgc.verify.sampler import Sample, sample_m
from epochgc.verify.switches import set_stall_switch, stall_switch
from epochgc.watermarks.controller import Controller
from epochgc.wiring.settings import client_settings_of
from epochgc.wiring.store import store_from_settings

log = logging.getLogger("epochgc.verify")

BUCKET = "epochgc-verify"
TOPICS = {"orders": 3, "clicks": 2}


def run_verify(
    seed: int,
    duration: float,
    folder: Path,
    *,
    spark: bool = False,
    unsafe_safe_epoch: bool = False,
    quiesce_timeout: float = 90.0,
    worker_log_level: str = "WARNING",
) -> VerifyResult:
    """One run (see the module docstring); the worker processes log at
    ``worker_log_level`` into ``folder``."""
    rng = random.Random(seed)
    fresh_run_folder(folder)
    result = VerifyResult(seed)
    bucket = f"{BUCKET}-{seed}-{uuid.uuid4().hex[:8]}"  # moto's state outlives a server
    with EmbeddedS3(bucket=bucket) as s3:
        # The embedded server's traceback for each 500 it answers (a moto
        # race the store retries) would drown the summary; set after the
        # start, which sets its own level.
        logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
        config_path = folder / "verify.toml"
        config_path.write_text(config_text(s3.endpoint_url, bucket, worker_log_level))
        config = load_config(config_path)
        store, _stats = store_from_settings(config, client_settings_of(config))
        controller = Controller(store, ROOT)
        for name, partitions in {**TOPICS, CHURN: CHURN_PARTITIONS}.items():
            controller.create_topic(name, partitions)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # The unsafe build is the workers' own composition (worker.py), not
        # something the environment could carry into another process.
        unsafe = ("--unsafe-test-build",) if unsafe_safe_epoch else ()
        procs = Processes(folder, config_path, seed, env, unsafe)
        for ident, role in (
            ("node-1", "node"),
            ("node-2", "node"),
            ("gc-1", "daemon"),
            ("gc-2", "daemon"),
        ):
            procs.start(ident, role)
        samples: list[Sample] = []
        sampling = threading.Event()
        sampler = threading.Thread(
            target=sample_m,
            args=(store, samples, sampling, folder),
            daemon=True,
            name="verify-m",
        )
        sampler.start()
        try:
            # The churn has a random stream of its own (from the seed), so
            # it interleaves with the other faults without reshuffling them.
            churn = Churn(store, folder, random.Random(f"churn-{seed}"), duration)
            churn.start()
            try:
                _disturb(
                    procs,
                    rng,
                    duration,
                    result,
                    config_path if spark else None,
                    folder,
                    _OperatorPauses(store, random.Random(f"pause-{seed}"), result),
                    _LoopStalls(procs, folder, random.Random(f"stall-{seed}"), result),
                    random.Random(f"clock-{seed}"),
                )
            finally:
                churn.finish(result)
            quiesce(store, procs, folder, quiesce_timeout, result)
        finally:
            procs.stop_all()
            sampling.set()
            sampler.join()
        check_outcome(store, folder, samples, result)
        churn.check(store, result)
    return result


def _disturb(
    procs: Processes,
    rng: random.Random,
    duration: float,
    result: VerifyResult,
    spark_config: Path | None,
    folder: Path,
    pauses: _OperatorPauses,
    stalls: _LoopStalls,
    clocks: random.Random,
) -> None:
    """The process faults, drawn from ``rng``; operator pauses, stalled
    node loops and days-off daemon clocks come from streams of their own,
    so adding them left the seed's schedule of the others as it was."""
    started = time.monotonic()
    spark_proc: subprocess.Popen[bytes] | None = None
    while time.monotonic() - started < duration:
        time.sleep(rng.uniform(1.5, 3.5))
        pauses.maybe_pause()
        stalls.maybe_stall()
        elapsed = time.monotonic() - started
        if spark_config is not None and spark_proc is None and elapsed > duration / 2:
            spark_proc = start_spark_job(spark_config, folder)
            procs.adopt(spark_proc)
            result.process_faults["spark_job"] += 1
        ident = rng.choice(sorted(procs.procs))
        action = rng.choice(["kill", "pause", "nothing", "leave"])
        if action == "leave":
            # The node (or daemon) leaves cleanly, the others take its
            # partitions (roles) at once, and it joins again a moment later:
            # a join that takes its share back by hand-back.
            procs.terminate(ident)
            result.process_faults[f"leave_{procs.roles[ident]}"] += 1
            time.sleep(rng.uniform(0.5, 2.5))
            procs.start(ident, procs.roles[ident], _days_off(procs.roles[ident], clocks, result))
            result.process_faults[f"join_{procs.roles[ident]}"] += 1
        elif action == "kill":
            procs.kill(ident)
            result.process_faults[f"kill_{procs.roles[ident]}"] += 1
            time.sleep(rng.uniform(0.2, 1.0))
            skew = 0.0
            if rng.random() < 0.3:  # restart it with its clock minutes off
                skew = rng.choice([-1, 1]) * rng.uniform(30, 120)
                result.process_faults[f"clock_skew_{procs.roles[ident]}"] += 1
            else:
                skew = _days_off(procs.roles[ident], clocks, result)
            procs.start(ident, procs.roles[ident], skew)
        elif action == "pause":
            proc = procs.procs[ident]
            proc.send_signal(signal.SIGSTOP)
            time.sleep(LEASE_TTL + rng.uniform(0.5, 1.5))
            proc.send_signal(signal.SIGCONT)
            result.process_faults[f"pause_past_ttl_{procs.roles[ident]}"] += 1
    stalls.settle(wait=True)
    if spark_proc is not None:
        spark_proc.wait(timeout=300)
        if spark_proc.returncode not in (0, 1):
            result.violations.append(f"the Spark job crashed (exit {spark_proc.returncode})")


class _OperatorPauses:
    """An operator pausing the collectors (``gc pause``) now and then, for
    2 to 4 s, between the other disturbances (never while a process is
    stopped, so no check-then-delete is frozen across the window). The
    daemons compact every 3 s and tidy every 2 s in a verify run, so their
    controller truncation, janitor and tidying fall due while paused;
    check (f) fails the run if any collector delete is logged inside a
    window (after ``PAUSE_GRACE_SECONDS``)."""

    def __init__(self, store: S3ObjectStore, rng: random.Random, result: VerifyResult) -> None:
        self._store = store
        self._rng = rng
        self._result = result

    def maybe_pause(self) -> None:
        if self._rng.random() >= 0.25:
            return
        hold = self._rng.uniform(2.0, 4.0)
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

    def _resume(self) -> None:
        for _ in range(10):
            try:
                resume(self._store, ROOT, by="verify", now=datetime.now(UTC))
                return
            except EpochGCError as err:
                log.warning("resuming the collectors failed (retrying): %s", err)
                time.sleep(0.5)
        self._result.violations.append("verify itself: could not resume the collectors")


def _days_off(role: str, clocks: random.Random, result: VerifyResult) -> float:
    """A restarted daemon's clock offset: now and then days ahead (it writes
    times from the future into shared documents, which must not stop the
    others) or days behind (it must delete nothing sooner); 0 otherwise."""
    if role != "daemon" or clocks.random() >= 0.4:
        return 0.0
    skew = clocks.choice([-1, 1]) * clocks.uniform(2, 5) * 86400
    result.process_faults[f"clock_days_{'ahead' if skew > 0 else 'behind'}_daemon"] += 1
    return skew


STALL_EXIT_SECONDS = 6 * LEASE_TTL + 15.0
"""How long a node with a stalled loop may take to exit: its round bound
(``reconciler.max_round_seconds``: four lease TTLs), letting go (one TTL),
a pause between rounds, and room for a busy machine."""


class _LoopStalls:
    """Now and then one node's rounds or ownership loop hangs or dies (the
    worker's ``stall-{id}`` switch: its store hangs or raises a bug's error
    for that loop's requests, while the lease heartbeat goes on). The node
    must stop renewing, let go, say which loop stopped and exit 1 within
    ``STALL_EXIT_SECONDS``; verify then restarts it, as a supervisor would.
    Check (g) fails the run otherwise; the record checks (a)-(d) hold as
    ever (its peers take its partitions over)."""

    def __init__(
        self, procs: Processes, folder: Path, rng: random.Random, result: VerifyResult
    ) -> None:
        self._procs = procs
        self._folder = folder
        self._rng = rng
        self._result = result
        self._pending: list[tuple[str, subprocess.Popen[bytes], float, str]] = []

    def maybe_stall(self) -> None:
        self.settle()
        if self._pending or self._rng.random() >= 0.15:
            return
        procs = self._procs
        nodes = sorted(i for i, r in procs.roles.items() if r == "node")
        ident = self._rng.choice(nodes)
        mode, loop = self._rng.choice(["hang", "fail"]), self._rng.choice(["rounds", "ownership"])
        if procs.procs[ident].poll() is not None:
            return
        set_stall_switch(self._folder, ident, f"{mode} {loop}")
        self._pending.append((ident, procs.procs[ident], time.monotonic(), f"{mode} {loop}"))
        self._result.process_faults[f"{mode}_{loop}_loop_node"] += 1

    def settle(self, *, wait: bool = False) -> None:
        """Restart every stalled node that exited; flag one that did not in
        time (with ``wait``, wait for each up to its deadline)."""
        procs = self._procs
        for item in list(self._pending):
            ident, proc, since, spec = item
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
            mode, loop = spec.split()
            what = f"(g) {ident}, its {loop} loop {'hung' if mode == 'hang' else 'failing'},"
            if code is None:
                self._result.violations.append(
                    f"{what} did not exit within {STALL_EXIT_SECONDS:.0f} s"
                )
                procs.kill(ident)
            elif code != 1:
                self._result.violations.append(f"{what} exited with {code}, not 1")
            elif f"loop {loop} stopped" not in _tail(self._folder / f"{ident}.log"):
                self._result.violations.append(f"{what} exited without naming the loop")
            procs.start(ident, "node")


def _tail(path: Path, size: int = 65536) -> str:
    try:
        with path.open("rb") as file:
            file.seek(max(0, path.stat().st_size - size))
            return file.read().decode("utf-8", "replace")
    except OSError:
        return ""


def summary(result: VerifyResult) -> str:
    lines = [
        f"epochgc verify --seed {result.seed}",
        f"records acknowledged {result.records_acked}, read back {result.records_verified}, "
        f"to deleted incarnations {result.records_discarded}, "
        f"duplicated by replays {result.duplicates}",
        f"deletions sent {result.deletions}; final M {result.safe_epoch}, cluster epoch "
        f"{result.cluster_epoch}",
        "store faults: " + ", ".join(f"{k} {v}" for k, v in sorted(result.store_faults.items())),
        "process faults: "
        + ", ".join(f"{k} {v}" for k, v in sorted(result.process_faults.items()))
        + f" (records unreconciled at topic deletes: {result.unreconciled_at_delete})",
    ]
    lines += [f"VIOLATION {v}" for v in result.violations]
    lines.append(
        "OK" if result.ok else f"FAILED: reproduce with `epochgc verify --seed {result.seed}`"
    )
    return "\n".join(lines)
