"""What an ``epochgc verify`` run is judged by, once its disturbed phase
is over: ``quiesce`` switches the faults and the producers off and waits
for the reconcilers to catch up and the collectors to delete everything
they may, then ``check_outcome`` holds the store, the run folder's logs
(acks, deletions, each daemon's ``M``) and the samples of ``M`` against
the safety properties:

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
(f) no collector delete is logged while an operator pause holds.

Check (e) is judged by the churn (``churn.py``) and check (g) by the loop
stalls (``disturbances.py``): each by the part that knows what it did.
Every violation found is a line of ``VerifyResult.violations``.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import time
from collections import Counter
from pathlib import Path

from epochgc.errors import EpochGCError
from epochgc.reconciler.reader import PartitionReader, check_read_back
from epochgc.storage.keys import (
    PartitionId,
    l0_prefix,
    parse_l0_key,
    parse_l1_key,
    parse_owner_key,
    parse_partition_meta_key,
)
from epochgc.storage.s3 import S3ObjectStore
from epochgc.verify.processes import Processes
from epochgc.verify.result import VerifyResult
from epochgc.verify.run_config import ROOT
from epochgc.verify.sampler import Sample
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.safe_epoch.aggregate import SafeEpochTracker
from epochgc.watermarks.safe_epoch.compute import compute_safe_epoch

PAUSE_GRACE_SECONDS = 1.0
"""A collector's delete logged this soon after a pause was acknowledged may
have read the control document just before it (the check and the batch
are a few milliseconds apart; this leaves room for a busy machine)."""


def quiesce(
    store: S3ObjectStore,
    procs: Processes,
    folder: Path,
    timeout: float,
    result: VerifyResult,
) -> None:
    """Faults and producing off, then wait up to ``timeout`` for every L0
    object to be collected and every live partition's ``M(p)`` to reach
    the epoch producing stopped at; a worker that died on its own is
    started again first. Not getting there is check (c)'s violation, with
    the partitions behind named and the state dumped."""
    (folder / "faults-off").touch()
    (folder / "producers-off").touch()
    # Every record was written at an epoch at or below this one (a produce
    # in flight may still land, at an epoch it already had).
    end = Controller(store, ROOT).current_epoch()
    for ident, proc in list(procs.procs.items()):
        if proc.poll() is not None:  # a worker that died on its own: bring it back
            procs.start(ident, procs.roles[ident])
    deadline = time.monotonic() + timeout
    left, behind = -1, ["not computed yet"]
    while time.monotonic() < deadline:
        time.sleep(1.0)
        left = sum(1 for _ in store.list_objects(l0_prefix(ROOT)))
        behind = _partitions_behind(store, end) if left == 0 else behind
        if left == 0 and not behind:
            return
    if left:  # the partitions behind say why
        behind = _partitions_behind(store, end)
    _dump_state(store, folder)
    if left:
        result.violations.append(
            f"(c) did not quiesce: {left} L0 objects still there {timeout:.0f}s after the "
            "faults stopped (M stuck?)"
        )
    if behind:
        result.violations.append(
            f"(c) M(p) of live partitions did not reach epoch {end} (the end of producing) "
            f"{timeout:.0f}s after the faults stopped: {'; '.join(behind)}"
        )


def _partitions_behind(store: S3ObjectStore, end: int) -> list[str]:
    """Each live partition whose ``M(p)`` (as the join sees it) is below
    ``end``, with its reconciliation progress: a partition stuck on a
    missing L0 object, or one that inherited another incarnation's log,
    shows here by name rather than only as an ``M`` that stopped."""
    controller = Controller(store, ROOT)
    safe = compute_safe_epoch(
        controller, store, ROOT, SafeEpochTracker(blocked_after=1), pinning=1_000_000
    )
    if safe is None:
        return ["M cannot be computed"]
    behind = []
    for w in safe.pinning:
        if w.safe_epoch >= end:
            continue
        pid = PartitionId(w.topic, w.revision, w.partition)
        try:
            state = PartitionReplica(store, ROOT, pid).open()
            progress = f"reconciled through {state.lro} of {state.next_offset} records"
        except EpochGCError as err:
            progress = f"cannot open: {err}"
        behind.append(f"{pid} M(p) {w.safe_epoch} ({w.node or 'unreported'}; {progress})")
    return behind


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
    """Every JSON line of the run folder's files matching ``pattern``."""
    docs: list[dict[str, object]] = []
    for path in sorted(folder.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # the line a kill -9 cut short
    return docs


def check_outcome(
    store: S3ObjectStore, folder: Path, samples: list[Sample], result: VerifyResult
) -> None:
    """Every check on a quiesced run: the store faults the workers counted
    into ``result``, then (a) to (d) and (f), each violation into it."""
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
    live = {(t.name, t.revision) for t in Controller(store, ROOT).snapshot().topics.values()}
    _check_deletions(folder, samples, result, live)
    _check_published_not_ahead(samples, result)
    _check_monotone(folder, samples, result)


def _check_records(store: S3ObjectStore, folder: Path, result: VerifyResult) -> None:
    live = Controller(store, ROOT).snapshot().live_partitions()
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
        if pid not in live:  # deleted: its records went with it
            result.records_discarded += len(rows)
    for pid in sorted(live):
        rows = acked.get(pid, {})
        try:
            stored = reader.read_partition(pid, 0)
        except Exception as err:
            result.violations.append(f"(a) {pid} cannot be read back: {err}")
            continue
        by_offset = {offset: record.decode() for offset, record in stored}
        if by_offset and min(by_offset) != 0:
            result.violations.append(f"(a) {pid}: records start at offset {min(by_offset)}, not 0")
        foreign = [o for o, r in by_offset.items() if _produced_to(r) not in (None, pid.revision)]
        if foreign:
            result.violations.append(
                f"(a) {pid}: {len(foreign)} records produced to another incarnation of "
                f"{pid.topic} (first at offset {min(foreign)}: {by_offset[min(foreign)]!r})"
            )
        payloads = Counter(by_offset.values())
        result.duplicates += sum(n - 1 for n in payloads.values() if n > 1)
        verified, problem = check_read_back(f"(a) {pid}", rows, by_offset)
        result.records_verified += verified
        if problem:
            result.violations.append(problem)


def _produced_to(record: str) -> int | None:
    """The revision a verify producer wrote ``record`` to (its payload is
    ``{node}.{seed}@{revision}:{n}``), or ``None`` for any other payload."""
    tag, _, _ = record.partition(":")
    _, at, revision = tag.rpartition("@")
    return int(revision) if at and revision.isdigit() else None


def tidied_incarnation(key: str) -> tuple[str, int] | bool | None:
    """What a GC leader's non-L0 delete of ``key`` may be: the incarnation
    whose partition metadata, L1 object, ownership record or old partition
    lease it is (the janitor), ``True`` for a controller entry (compaction), a node report
    or a run summary (tidying) or a daemon's presence document (its clean
    stop), ``False`` for anything else."""
    tidy = ("meta/controller/", "meta/reports/", "gc/runs/", "gc/daemons/")
    if key.startswith(tuple(f"{ROOT}/{prefix}" for prefix in tidy)):
        return True
    if (pid := parse_partition_meta_key(key, ROOT)) is not None:
        return (pid.topic, pid.revision)
    if (l1 := parse_l1_key(key, ROOT)) is not None:
        return (l1.topic, l1.revision)
    if (owned := parse_owner_key(key, ROOT)) is not None:
        return (owned.topic, owned.revision)
    lease = f"{ROOT}/meta/leases/partition."
    if key.startswith(lease):
        topic, revision, partition = ([*key[len(lease) :].rsplit(".", 2), "", ""])[:3]
        if revision.isdigit() and partition.isdigit():
            return (topic, int(revision))
    return False


def _check_deletions(
    folder: Path,
    samples: list[Sample],
    result: VerifyResult,
    live: set[tuple[str, int]],
) -> None:
    times = [sample.t for sample in samples]
    deletes = _read_lines(folder, "deletes-*.jsonl")
    result.deletions = len(deletes)
    early = 0
    paused = [(start + PAUSE_GRACE_SECONDS, end) for start, end in result.paused]
    for doc in deletes:
        epoch = doc.get("e")
        moment = float(doc["t"])  # type: ignore[arg-type]
        if doc.get("role") != "node" and any(a <= moment <= b for a, b in paused):
            result.violations.append(f"(f) a paused collector deleted {doc.get('k')}")
        if doc.get("role") == "node":
            # Nodes delete only their partition logs' old entries (truncation).
            if isinstance(epoch, int) or str(doc.get("k", "")).startswith(l0_prefix(ROOT)):
                result.violations.append(f"(b) a reconciler node deleted {doc.get('k')}")
            continue
        if not isinstance(epoch, int):
            # The GC leader also tidies: controller compaction, gone nodes'
            # reports, old runs, and the janitor (never a live incarnation).
            tidied = tidied_incarnation(str(doc.get("k", "")))
            if tidied is False or tidied in live:
                result.violations.append(
                    f"(b) the collector deleted {doc.get('k')}"
                    + (" of a live topic incarnation" if tidied else " (not an L0 key)")
                )
            continue
        # The logs' M of the first sample taken after the deletion bounds
        # the true M then (it only grows).
        i = bisect.bisect_left(times, float(doc["t"]))  # type: ignore[arg-type]
        if i < len(samples) and epoch > samples[i].logged:
            early += 1
    if early:
        result.violations.append(f"(b) {early} deletions of epochs above the true M of their time")


def _check_published_not_ahead(samples: list[Sample], result: VerifyResult) -> None:
    """A published ``M`` above the logs' ``M`` read just after it is
    unsafe whether or not anything was deleted under it (``truth.py``)."""
    ahead = [sample for sample in samples if sample.published > sample.logged]
    if ahead:
        first = ahead[0]
        result.violations.append(
            f"(b) the published M ran ahead of the partition logs in {len(ahead)} of "
            f"{len(samples)} samples (first: published {first.published}, "
            f"logs {first.logged}; see sampled-m.jsonl)"
        )


def _check_monotone(folder: Path, samples: list[Sample], result: VerifyResult) -> None:
    """This process's samples, and each daemon process's own values (a
    restarted daemon is a new observer: its floor starts again)."""
    series: dict[str, list[int]] = {
        "verify (sampled-m.jsonl)": [sample.published for sample in samples]
    }
    for doc in _read_lines(folder, "m-*.jsonl"):
        series.setdefault(f"daemon pid {doc.get('pid')}", []).append(int(doc["m"]))  # type: ignore[call-overload]
    for name, values in series.items():
        drops = [(a, b) for a, b in itertools.pairwise(values) if b < a]
        if drops:
            result.violations.append(f"(d) M decreased in {name}: {drops[:3]}")
