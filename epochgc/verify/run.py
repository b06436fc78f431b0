"""``epochgc verify``: a randomized end-to-end run under faults, then the
safety checks. "Never too soon, not much too late", checked.

The run (everything drawn from ``--seed``): the embedded S3 in this
process; two reconciler nodes (each with producers writing to the
partitions it leads) and two GC daemons as separate processes, all behind a
``FaultyStore`` (failed requests, SlowDown, lost answers of applied
requests, latency, partial DeleteObjects); process faults from here:
``kill -9`` of a node or daemon (restarted a moment later) and ``SIGSTOP``
past the lease TTL (leases expire and are taken over, then the process
wakes up fenced); optionally a Spark GC job mid-way. Meanwhile this process
samples the true ``M`` (the join, on a clean store) every half second.

Then it quiesces (faults off, producers off, wait for the reconcilers to
catch up and the collectors to delete everything they may) and checks:

(a) every acknowledged record reads back at its offset, byte for byte;
    acknowledged offsets are distinct (payloads duplicated at other,
    unacknowledged offsets by at-least-once replays are counted);
(b) no deletion came before its time: every key a collector sent to
    DeleteObjects had an epoch at or below the true ``M`` of that moment;
(c) after quiesce, no L0 object with epoch <= ``M`` is left;
(d) ``M`` never decreased, for this process's samples and for each daemon.

Exit 1 on any violation, with the seed to reproduce it.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from epochgc.config import load_config
from epochgc.errors import EpochGCError
from epochgc.reconciler.reader import PartitionReader
from epochgc.runtime import client_settings_of, store_from_settings
from epochgc.storage.embedded import EMBEDDED_ACCESS_KEY, EMBEDDED_SECRET_KEY, EmbeddedS3
from epochgc.storage.keys import PartitionId, l0_prefix, parse_l0_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.aggregate import SafeEpochTracker
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.replica import PartitionReplica
from epochgc.watermarks.safe_epoch import compute_safe_epoch

log = logging.getLogger("epochgc.verify")

ROOT = "epochgc"
BUCKET = "epochgc-verify"
TOPICS = {"orders": 3, "clicks": 2}
LEASE_TTL = 3.0


@dataclass
class VerifyResult:
    """What a run did and found."""

    seed: int
    records_acked: int = 0
    records_verified: int = 0
    duplicates: int = 0
    deletions: int = 0
    safe_epoch: int = 0
    cluster_epoch: int = 0
    store_faults: Counter[str] = field(default_factory=Counter)
    process_faults: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations and self.records_acked > 0


def _config_text(endpoint: str, bucket: str, log_level: str) -> str:
    return f"""
[logging]
level = "{log_level}"
[store]
bucket = "{bucket}"
endpoint_url = "{endpoint}"
access_key_id = "{EMBEDDED_ACCESS_KEY}"
secret_access_key = "{EMBEDDED_SECRET_KEY}"
addressing_style = "path"
max_attempts = 3
base_backoff_seconds = 0.01
max_backoff_seconds = 0.1
[layout]
root = "{ROOT}"
l0_shards = 8
[epoch]
interval_seconds = 1.0
cache_ttl_seconds = 0.5
# The daemons compete for the one ticker role (the nodes here run no ticker).
ticker = true
[lease]
ttl_seconds = {LEASE_TTL}
renew_interval_seconds = 0.5
skew_margin_seconds = 0.5
[reconciler]
round_interval_seconds = 0.2
idle_interval_seconds = 1.0
snapshot_every_entries = 50
[reports]
interval_seconds = 0.5
[gc]
min_object_age_seconds = 0.0
max_delete_fraction = 1.0
[daemon]
interval_seconds = 1.0
after_progress_seconds = 0.2
after_failure_seconds = 0.3
control_poll_seconds = 0.5
blocked_after_failures = 1000
[metrics]
listen = ""
"""


class _Processes:
    """The worker processes, with their kill/pause/restart history."""

    def __init__(self, folder: Path, config: Path, seed: int, env: dict[str, str]) -> None:
        self._folder = folder
        self._config = config
        self._seed = seed
        self._env = env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.roles: dict[str, str] = {}
        self._generation: Counter[str] = Counter()

    def start(self, ident: str, role: str, clock_skew: float = 0.0) -> None:
        self.roles[ident] = role
        self._generation[ident] += 1
        logfile = (self._folder / f"{ident}.log").open("ab")
        self.procs[ident] = subprocess.Popen(  # noqa: S603 - our interpreter, our module
            [
                sys.executable,
                "-m",
                "epochgc.verify.worker",
                "--role",
                role,
                "--id",
                ident,
                "--config",
                str(self._config),
                "--folder",
                str(self._folder),
                "--seed",
                str(self._seed * 1000 + self._generation[ident]),
                "--clock-skew",
                str(clock_skew),
            ],
            stdout=logfile,
            stderr=logfile,
            env=self._env,
        )

    def kill(self, ident: str) -> None:
        proc = self.procs[ident]
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


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
    folder.mkdir(parents=True, exist_ok=True)
    result = VerifyResult(seed)
    bucket = f"{BUCKET}-{seed}-{uuid.uuid4().hex[:8]}"  # moto's state outlives a server
    with EmbeddedS3(bucket=bucket) as s3:
        # The embedded server's traceback for each 500 it answers (a moto
        # race the store retries) would drown the summary; set after the
        # start, which sets its own level.
        logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
        config_path = folder / "verify.toml"
        config_path.write_text(_config_text(s3.endpoint_url, bucket, worker_log_level))
        config = load_config(config_path)
        store, _stats = store_from_settings(config, client_settings_of(config))
        controller = Controller(store, ROOT)
        for name, partitions in TOPICS.items():
            controller.create_topic(name, partitions)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if unsafe_safe_epoch:
            env["EPOCHGC_TEST_UNSAFE_REPORTS"] = "max_applied"
        procs = _Processes(folder, config_path, seed, env)
        for ident, role in (
            ("node-1", "node"),
            ("node-2", "node"),
            ("gc-1", "daemon"),
            ("gc-2", "daemon"),
        ):
            procs.start(ident, role)
        samples: list[tuple[float, int]] = []
        sampling = threading.Event()
        sampler = threading.Thread(
            target=_sample_m,
            args=(store, samples, sampling, folder),
            daemon=True,
            name="verify-m",
        )
        sampler.start()
        try:
            _disturb(procs, rng, duration, result, config_path if spark else None, folder)
            _quiesce(store, procs, folder, quiesce_timeout, result)
        finally:
            procs.stop_all()
            sampling.set()
            sampler.join()
        _check(store, folder, samples, result)
    return result


def _sample_m(
    store: S3ObjectStore, samples: list[tuple[float, int]], stop: threading.Event, folder: Path
) -> None:
    """The true ``M`` twice a second, each sample with the partitions that
    pinned it into ``sampled-m.jsonl`` (where a drop comes from)."""
    controller = Controller(store, ROOT)
    with (folder / "sampled-m.jsonl").open("a", encoding="utf-8") as out:
        while not stop.wait(0.5):
            safe = compute_safe_epoch(controller, store, ROOT, SafeEpochTracker(blocked_after=1))
            if safe is None:
                continue
            now = time.time()
            samples.append((now, safe.safe_epoch))
            pinning = [[w.topic, w.partition, w.safe_epoch, w.node] for w in safe.pinning]
            out.write(json.dumps({"t": now, "m": safe.safe_epoch, "pinning": pinning}) + "\n")
            out.flush()


def _disturb(
    procs: _Processes,
    rng: random.Random,
    duration: float,
    result: VerifyResult,
    spark_config: Path | None,
    folder: Path,
) -> None:
    started = time.monotonic()
    spark_proc: subprocess.Popen[bytes] | None = None
    while time.monotonic() - started < duration:
        time.sleep(rng.uniform(1.5, 3.5))
        elapsed = time.monotonic() - started
        if spark_config is not None and spark_proc is None and elapsed > duration / 2:
            spark_proc = subprocess.Popen(  # noqa: S603 - our interpreter, our module
                [
                    sys.executable,
                    "-m",
                    "epochgc.cli",
                    "gc",
                    "spark",
                    "--master",
                    "local[1]",
                    "--config",
                    str(spark_config),
                ],
                stdout=(folder / "spark.log").open("ab"),
                stderr=subprocess.STDOUT,
            )
            result.process_faults["spark_job"] += 1
        ident = rng.choice(sorted(procs.procs))
        action = rng.choice(["kill", "pause", "nothing"])
        if action == "kill":
            procs.kill(ident)
            result.process_faults[f"kill_{procs.roles[ident]}"] += 1
            time.sleep(rng.uniform(0.2, 1.0))
            skew = 0.0
            if rng.random() < 0.3:  # restart it with its clock minutes off
                skew = rng.choice([-1, 1]) * rng.uniform(30, 120)
                result.process_faults[f"clock_skew_{procs.roles[ident]}"] += 1
            procs.start(ident, procs.roles[ident], skew)
        elif action == "pause":
            proc = procs.procs[ident]
            proc.send_signal(signal.SIGSTOP)
            time.sleep(LEASE_TTL + rng.uniform(0.5, 1.5))
            proc.send_signal(signal.SIGCONT)
            result.process_faults[f"pause_past_ttl_{procs.roles[ident]}"] += 1
    if spark_proc is not None:
        spark_proc.wait(timeout=300)
        if spark_proc.returncode not in (0, 1):
            result.violations.append(f"the Spark job crashed (exit {spark_proc.returncode})")


def _quiesce(
    store: S3ObjectStore,
    procs: _Processes,
    folder: Path,
    timeout: float,
    result: VerifyResult,
) -> None:
    (folder / "faults-off").touch()
    (folder / "producers-off").touch()
    for ident, proc in list(procs.procs.items()):
        if proc.poll() is not None:  # a worker that died on its own: bring it back
            procs.start(ident, procs.roles[ident])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1.0)
        if not any(True for _ in store.list_objects(l0_prefix(ROOT))):
            return
    left = sum(1 for _ in store.list_objects(l0_prefix(ROOT)))
    _dump_state(store, folder)
    result.violations.append(
        f"(c) did not quiesce: {left} L0 objects still there {timeout:.0f}s after the faults "
        "stopped (M stuck?)"
    )


def _dump_state(store: S3ObjectStore, folder: Path) -> None:
    """What a stuck run looks like, for whoever debugs it: every node
    report, lease and partition state, into ``final-state.json``."""
    state: dict[str, object] = {}
    for prefix in (f"{ROOT}/meta/reports/", f"{ROOT}/meta/leases/", f"{ROOT}/gc/status.json"):
        for info in store.list_objects(prefix):
            try:
                state[info.key] = json.loads(store.get(info.key).body)
            except (ValueError, EpochGCError) as err:
                state[info.key] = f"unreadable: {err}"
    view = Controller(store, ROOT).snapshot()
    for pid in sorted(view.live_partitions()):
        replica = PartitionReplica(store, ROOT, pid)
        try:
            replica.open()
            state[f"partition {pid}"] = {
                **dataclasses.asdict(replica.state),
                "safe_epoch": replica.state.safe_epoch,
                "hole": replica.hole,
            }
        except EpochGCError as err:
            state[f"partition {pid}"] = f"cannot open: {err}"
    (folder / "final-state.json").write_text(json.dumps(state, indent=2, default=str))


def _read_lines(folder: Path, pattern: str) -> list[dict[str, object]]:
    docs: list[dict[str, object]] = []
    for path in sorted(folder.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # the line a kill -9 cut short
    return docs


def _check(
    store: S3ObjectStore, folder: Path, samples: list[tuple[float, int]], result: VerifyResult
) -> None:
    for path in folder.glob("faults-*.json"):
        try:
            result.store_faults.update(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    _check_records(store, folder, result)
    controller = Controller(store, ROOT)
    safe = compute_safe_epoch(controller, store, ROOT, SafeEpochTracker(blocked_after=1))
    if safe is None:
        result.violations.append("(c) M cannot be computed after quiesce")
        return
    result.safe_epoch, result.cluster_epoch = safe.safe_epoch, controller.current_epoch()
    stale = [
        parsed.epoch
        for o in store.list_objects(l0_prefix(ROOT))
        if (parsed := parse_l0_key(o.key, ROOT)) is not None and parsed.epoch <= safe.safe_epoch
    ]
    if stale:
        result.violations.append(
            f"(c) {len(stale)} L0 objects with epoch <= M={safe.safe_epoch} left after quiesce"
        )
    _check_deletions(folder, samples, result)
    _check_monotone(folder, samples, result)


def _check_records(store: S3ObjectStore, folder: Path, result: VerifyResult) -> None:
    acked: dict[PartitionId, dict[int, str]] = {}
    for doc in _read_lines(folder, "acks-*.jsonl"):
        key = PartitionId(
            str(doc["t"]),
            int(doc["rv"]),  # type: ignore[call-overload]
            int(doc["p"]),  # type: ignore[call-overload]
        )
        offset, record = int(doc["o"]), str(doc["r"])  # type: ignore[call-overload]
        previous = acked.setdefault(key, {}).setdefault(offset, record)
        if previous != record:
            result.violations.append(f"(a) {key} offset {offset} acknowledged for two records")
    reader = PartitionReader(store, ROOT)
    for pid, rows in sorted(acked.items()):
        result.records_acked += len(rows)
        try:
            stored = reader.read_partition(pid, 0)
        except Exception as err:
            result.violations.append(f"(a) {pid} cannot be read back: {err}")
            continue
        by_offset = {offset: record.decode() for offset, record in stored}
        payloads = Counter(by_offset.values())
        result.duplicates += sum(n - 1 for n in payloads.values() if n > 1)
        wrong = [o for o, r in rows.items() if by_offset.get(o) != r]
        result.records_verified += len(rows) - len(wrong)
        if wrong:
            result.violations.append(
                f"(a) {pid}: {len(wrong)} acknowledged records missing or "
                f"different (first at offset {min(wrong)})"
            )


def _check_deletions(folder: Path, samples: list[tuple[float, int]], result: VerifyResult) -> None:
    times = [t for t, _ in samples]
    deletes = _read_lines(folder, "deletes-*.jsonl")
    result.deletions = len(deletes)
    early = 0
    for doc in deletes:
        epoch = doc.get("e")
        if doc.get("role") == "node":
            # Nodes delete only their partition logs' old entries (truncation).
            if isinstance(epoch, int) or str(doc.get("k", "")).startswith(l0_prefix(ROOT)):
                result.violations.append(f"(b) a reconciler node deleted {doc.get('k')}")
            continue
        if not isinstance(epoch, int):
            result.violations.append(f"(b) the collector deleted a non-L0 key: {doc.get('k')}")
            continue
        # The first sample taken after the deletion bounds the true M then.
        i = bisect.bisect_left(times, float(doc["t"]))  # type: ignore[arg-type]
        if i < len(samples) and epoch > samples[i][1]:
            early += 1
    if early:
        result.violations.append(f"(b) {early} deletions of epochs above the true M of their time")


def _check_monotone(folder: Path, samples: list[tuple[float, int]], result: VerifyResult) -> None:
    """This process's samples, and each daemon process's own values (a
    restarted daemon is a new observer: its floor starts again)."""
    series: dict[str, list[int]] = {"verify (sampled-m.jsonl)": [m for _, m in samples]}
    for doc in _read_lines(folder, "m-*.jsonl"):
        series.setdefault(f"daemon pid {doc.get('pid')}", []).append(int(doc["m"]))  # type: ignore[call-overload]
    for name, values in series.items():
        drops = [(a, b) for a, b in itertools.pairwise(values) if b < a]
        if drops:
            result.violations.append(f"(d) M decreased in {name}: {drops[:3]}")


def summary(result: VerifyResult) -> str:
    lines = [
        f"epochgc verify --seed {result.seed}",
        f"records acknowledged {result.records_acked}, read back {result.records_verified}, "
        f"duplicated by replays {result.duplicates}",
        f"deletions sent {result.deletions}; final M {result.safe_epoch}, cluster epoch "
        f"{result.cluster_epoch}",
        "store faults: " + ", ".join(f"{k} {v}" for k, v in sorted(result.store_faults.items())),
        "process faults: "
        + ", ".join(f"{k} {v}" for k, v in sorted(result.process_faults.items())),
    ]
    lines += [f"VIOLATION {v}" for v in result.violations]
    lines.append(
        "OK" if result.ok else f"FAILED: reproduce with `epochgc verify --seed {result.seed}`"
    )
    return "\n".join(lines)
