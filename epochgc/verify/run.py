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
catch up and the collectors to delete everything they may) and checks the
outcome (``checks.py``: every acknowledged record back, no deletion before
its time, nothing eligible left, ``M`` never down). Exit 1 on any
violation, with the seed to reproduce it.

This module puts one run together and prints its summary; each part has a
module of its own: ``processes.py`` (the child processes), ``sampler.py``
(``M``, sampled), ``disturbances.py`` (the faults of the disturbed phase,
each drawing from a random stream of its own), ``churn.py`` (the topic
deleted and recreated, the controller compacted), ``checks.py`` (the
quiesce and the checks), ``run_config.py`` (what the workers are given)
and ``result.py`` (what a run found).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from pathlib import Path

from epochgc.config import load_config
from epochgc.storage.embedded import EmbeddedS3
from epochgc.verify.checks import check_outcome, quiesce
from epochgc.verify.churn import CHURN, CHURN_PARTITIONS, Churn
from epochgc.verify.disturbances import (
    DaysOffClocks,
    Disturbance,
    LoopStalls,
    OperatorPauses,
    ProcessFaults,
    SparkJobMidway,
    disturb,
)
from epochgc.verify.processes import Processes
from epochgc.verify.result import VerifyResult
from epochgc.verify.run_config import ROOT, config_text
from epochgc.verify.run_folder import fresh_run_folder
from epochgc.verify.sampler import Sample, sample_m
from epochgc.watermarks.controller import Controller
from epochgc.wiring.settings import client_settings_of
from epochgc.wiring.store import store_from_settings

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
            churn = Churn(store, folder, seed, duration)
            churn.start()
            try:
                # Each draws from a stream of its own (disturbances.py); the
                # process faults set the pace of the rounds, as they always have.
                faults = ProcessFaults(procs, seed, DaysOffClocks(seed, result), result)
                disturbances: list[Disturbance] = [
                    OperatorPauses(store, seed, result),
                    LoopStalls(procs, folder, seed, result),
                ]
                if spark:
                    disturbances.append(
                        SparkJobMidway(procs, config_path, folder, duration, result)
                    )
                disturbances.append(faults)
                disturb(disturbances, duration, pace=faults.pace)
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
