"""Why one object is or is not deletable (``epochgc gc explain KEY``).

An operator looking at an old L0 object wants the collector's answer and
its reasons in one place: the deletion rule itself (``eligibility.judge``,
so the answer cannot drift from what a round does), and around it what
stops a round from acting on it (a pause, a ``safety_blocked`` collector)
or could (the delete-fraction guard). When the object's epoch is above
``M``, the partitions pinning ``M`` below it are named with what is known
of them: the node that reported them, the node that owns them, their
reconciliation lag and, for a stuck partition, the cause.

``read_explain_inputs`` reads all that from the bucket; ``explain``, the
verdict, is pure, and ``explanation_view`` is what the command prints.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from epochgc.errors import EpochGCError
from epochgc.gc.control import read_control
from epochgc.gc.deletion_record import DeletionSearch, find_deletion
from epochgc.gc.eligibility import Verdict, judge
from epochgc.ownership.owner_records import read_owner
from epochgc.storage import documents
from epochgc.storage.keys import PartitionId, parse_l0_key
from epochgc.storage.object_store import ObjectStore, head_or_none
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.safe_epoch.aggregate import PartitionWatermark
from epochgc.watermarks.safe_epoch.compute import compute_safe_epoch_once
from epochgc.watermarks.safe_epoch.reports import StuckCause

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PinningPartition:
    """One partition whose ``M(p)`` keeps ``M`` below the object's epoch."""

    topic: str
    revision: int
    partition: int
    safe_epoch: int
    reported_by: str | None
    """``None``: no node reported it; it counts as ``revision - 1``."""
    owner: str | None = None
    """The holder of its partition lease (``None``: none, or unreadable)."""
    lag_records: int | None = None
    """Records appended but not reconciled (``None``: unknown)."""
    stuck: StuckCause | None = None


@dataclass(frozen=True)
class ExplainInputs:
    """Everything the verdict depends on, gathered by the command."""

    key: str
    root: str
    safe_epoch: int | None
    """``M`` as the collector would compute it now (``None``: it cannot)."""
    pinning: tuple[PinningPartition, ...]
    last_modified: datetime | None
    """``None``: the object does not exist."""
    min_object_age: timedelta
    now: datetime
    paused: bool = False
    paused_by: str = ""
    paused_reason: str = ""
    max_delete_fraction: float = 1.0
    deletion: DeletionSearch | None = None
    """For a missing L0 key: what the kept deletion records say."""


@dataclass(frozen=True)
class Reason:
    """One finding: a stable ``code`` for scripts and a sentence for people.
    ``blocking`` findings are why the object is not deleted now."""

    code: str
    text: str
    blocking: bool = True


@dataclass(frozen=True)
class Explanation:
    deletable: bool
    """A round run now would delete it (the guard aside, see ``reasons``)."""
    epoch: int | None
    safe_epoch: int | None
    reasons: tuple[Reason, ...]
    pinning: tuple[PinningPartition, ...]
    """The partitions with ``M(p)`` below the object's epoch (empty unless
    ``above_safe_epoch``)."""


def read_explain_inputs(
    store: ObjectStore,
    root: str,
    key: str,
    *,
    min_object_age: timedelta,
    max_delete_fraction: float,
    pinning: int,
    now: datetime,
) -> ExplainInputs:
    """Read what the verdict on ``key`` depends on: the object's HEAD,
    ``M`` with its ``pinning`` lowest partitions, the control document, and
    for each pinning partition below the object's epoch what is known of it
    (``pinning_partition``).

    Raises:
        StorageError: the store could not be read.
    """
    info = head_or_none(store, key)
    last_modified = info.last_modified if info is not None else None
    deletion = None
    if info is None and parse_l0_key(key, root) is not None:
        deletion = find_deletion(store, root, key)
    safe, _untrusted = compute_safe_epoch_once(store, root, pinning=pinning)
    control, _etag = read_control(store, root)
    parsed = parse_l0_key(key, root)
    pins: tuple[PinningPartition, ...] = ()
    if safe is not None and parsed is not None:
        pins = tuple(
            pinning_partition(store, root, w) for w in safe.pinning if w.safe_epoch < parsed.epoch
        )
    return ExplainInputs(
        key=key,
        root=root,
        safe_epoch=None if safe is None else safe.safe_epoch,
        pinning=pins,
        last_modified=last_modified,
        min_object_age=min_object_age,
        now=now,
        paused=control.paused,
        paused_by=control.updated_by,
        paused_reason=control.reason,
        max_delete_fraction=max_delete_fraction,
        deletion=deletion,
    )


def pinning_partition(store: ObjectStore, root: str, w: PartitionWatermark) -> PinningPartition:
    """What is known of one pinning partition: its owner (from its
    ownership record) and its reconciliation lag (read from its log); each
    ``None`` when unreadable (logged: the verdict does not depend on them)."""
    pid = PartitionId(w.topic, w.revision, w.partition)
    owner: str | None = None
    lag: int | None = None
    try:
        record = read_owner(store, root, pid)
        owner = None if record is None or record.released else record.node
    except EpochGCError as err:
        log.warning("%s: ownership record unreadable: %s", pid, err)
    try:
        replica = PartitionReplica(store, root, pid)
        state = replica.open()
        lag = max(0, state.next_offset - 1 - state.lro)
    except EpochGCError as err:
        log.warning("%s: partition log unreadable: %s", pid, err)
    return PinningPartition(
        w.topic, w.revision, w.partition, w.safe_epoch, w.node, owner, lag, w.stuck
    )


def explain(inputs: ExplainInputs) -> Explanation:
    """The verdict for one key, with every reason that applies."""
    reasons: list[Reason] = []
    pinning: tuple[PinningPartition, ...] = ()
    epoch: int | None = None
    if inputs.safe_epoch is None:
        reasons.append(
            Reason(
                "safety_blocked",
                "M cannot be computed from trusted inputs now; the collector deletes nothing "
                "(see `epochgc gc epoch-info` and the daemon log)",
            )
        )
    safe = inputs.safe_epoch if inputs.safe_epoch is not None else -1
    verdict, parsed = judge(
        inputs.key,
        inputs.last_modified or inputs.now,
        root=inputs.root,
        safe_epoch=safe,
        now=inputs.now,
        min_age=inputs.min_object_age,
    )
    if parsed is not None:
        epoch = parsed.epoch
    if verdict is Verdict.OUTSIDE_ROOT:
        reasons.append(Reason("outside_root", f"not under {inputs.root}/l0/: never ours to delete"))
    elif verdict is Verdict.UNPARSEABLE:
        reasons.append(
            Reason(
                "unparseable",
                f"not an L0 key of this root ({inputs.root}/l0/{{shard:03d}}/"
                "{epoch:018d}/{uuid}): never deleted",
            )
        )
    elif inputs.last_modified is None:
        reasons.append(_missing(inputs.deletion))
    if parsed is not None and inputs.safe_epoch is not None:
        if parsed.epoch > inputs.safe_epoch:
            pinning = tuple(p for p in inputs.pinning if p.safe_epoch < parsed.epoch)
            names = ", ".join(_describe(p) for p in pinning) or "(none among those listed)"
            reasons.append(
                Reason(
                    "above_safe_epoch",
                    f"epoch {parsed.epoch} > M {inputs.safe_epoch}: a live partition may still "
                    f"need it; pinned by {names}",
                )
            )
        else:
            reasons.append(
                Reason(
                    "at_or_below_safe_epoch",
                    f"epoch {parsed.epoch} <= M {inputs.safe_epoch}: no live partition needs it",
                    blocking=False,
                )
            )
    if parsed is not None and inputs.last_modified is not None:
        age = inputs.now - inputs.last_modified
        if age < inputs.min_object_age:
            reasons.append(
                Reason(
                    "too_young",
                    f"written {_seconds(age)} ago, under gc.min_object_age_seconds "
                    f"({_seconds(inputs.min_object_age)})",
                )
            )
    if inputs.paused:
        by = f" by {inputs.paused_by}" if inputs.paused_by else ""
        why = f": {inputs.paused_reason}" if inputs.paused_reason else ""
        reasons.append(Reason("paused", f"the collector is paused{by}{why} (`epochgc gc resume`)"))
    if inputs.max_delete_fraction < 1.0:
        reasons.append(
            Reason(
                "guard",
                f"a round that would delete more than {inputs.max_delete_fraction:.0%} of the "
                "L0 objects it lists stops before deleting (gc.max_delete_fraction; --force)",
                blocking=False,
            )
        )
    deletable = not any(r.blocking for r in reasons)
    if deletable:
        reasons.insert(
            0,
            Reason(
                "eligible",
                "the next round that lists its shard deletes it (within gc.max_lag_seconds "
                "of M passing its epoch; `gc collect --all-shards` now)",
                blocking=False,
            ),
        )
    return Explanation(deletable, epoch, inputs.safe_epoch, tuple(reasons), pinning)


def _missing(search: DeletionSearch | None) -> Reason:
    """Why a key is not there: the run that deleted it, or what was searched."""
    found = None if search is None else search.found
    if found is not None:
        when = (
            "at an unknown time"
            if found.finished_at is None
            else (f"in the run that ended {documents.format_time(found.finished_at)}")
        )
        return Reason(
            "deleted",
            f"deleted by run {found.run_id} {when}, at M {found.m} (epoch {found.epoch}, "
            f"shard {found.shard}, {found.size} bytes; `epochgc gc runs --deleted "
            f"{found.run_id}`)",
        )
    searched = (
        ""
        if search is None
        else f"; no kept deletion record has it ({search.runs_searched} of "
        f"{search.runs_kept} runs with records searched; records go with their run "
        "after gc.runs_retention_days, and none are written with gc.record_deletions = false)"
    )
    return Reason("missing", f"no such object (already deleted, or never written){searched}")


def explanation_view(key: str, result: Explanation) -> tuple[dict[str, object], list[str]]:
    """The JSON document and the lines ``gc explain`` prints."""
    data: dict[str, object] = {
        "key": key,
        "deletable": result.deletable,
        "epoch": result.epoch,
        "safe_epoch": result.safe_epoch,
        "reasons": [
            {"code": r.code, "text": r.text, "blocking": r.blocking} for r in result.reasons
        ],
        "pinning": [
            {
                "topic": p.topic,
                "revision": p.revision,
                "partition": p.partition,
                "safe_epoch": p.safe_epoch,
                "reported_by": p.reported_by,
                "owner": p.owner,
                "lag_records": p.lag_records,
                "stuck": None if p.stuck is None else p.stuck.to_json(),
            }
            for p in result.pinning
        ],
    }
    epoch = "-" if result.epoch is None else str(result.epoch)
    safe = "unknown" if result.safe_epoch is None else str(result.safe_epoch)
    deleted = next((r for r in result.reasons if r.code == "deleted"), None)
    if deleted is not None:  # what the asker wants to know first
        lines = [f"{key}: already {deleted.text}"]
    else:
        verdict = "deletable" if result.deletable else "not deletable"
        lines = [f"{key}: {verdict} (epoch {epoch}, M {safe})"]
    lines += [
        f"  {'x' if r.blocking else '-'} {r.code}: {r.text}"
        for r in result.reasons
        if r is not deleted
    ]
    return data, lines


def _describe(p: PinningPartition) -> str:
    parts = [f"M(p) {p.safe_epoch}"]
    parts.append(f"reported by {p.reported_by}" if p.reported_by else "no report")
    if p.owner:
        parts.append(f"owned by {p.owner}")
    if p.lag_records is not None:
        parts.append(f"lag {p.lag_records} records")
    if p.stuck is not None:
        parts.append(
            f"stuck: {p.stuck.cause} {p.stuck.key} (records "
            f"{p.stuck.first_offset}..{p.stuck.last_offset})"
        )
    return f"{p.topic}/{p.partition} ({', '.join(parts)})"


def _seconds(delta: timedelta) -> str:
    return f"{delta.total_seconds():.0f}s"
