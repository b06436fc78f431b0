"""The collector's control and status documents, kept in the bucket.

``{root}/gc/control.json`` holds what operators ask for: paused or not (and
why, by whom), and a reset counter. It lives in the bucket, not in a
daemon, so a pause outlives restarts and reaches whichever daemon holds the
GC lease. Writers use compare-and-swap, so two operators never overwrite
each other's request unseen.

``{root}/gc/status.json`` is what the GC lease holder last said about
itself (state, ``M``, the last round); ``epochgc gc status`` reads both.

Both are versioned JSON objects like every other document of ours: unknown
fields are ignored, a newer ``v`` is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from epochgc.errors import (
    EpochGCError,
    MalformedRecordError,
    PreconditionFailedError,
)
from epochgc.storage import documents
from epochgc.storage.keys import gc_control_key, gc_status_key
from epochgc.storage.object_store import ObjectStore, get_or_none

log = logging.getLogger(__name__)

CONTROL_VERSION = 1
STATUS_VERSION = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class CollectorState(Enum):
    """What the collector is doing (docs/operating.md, "The collector's states")."""

    RUNNING = "running"
    PAUSED = "paused"
    SAFETY_BLOCKED = "safety_blocked"
    """``M`` could not be computed from trusted inputs several times in a
    row; nothing is deleted until an operator runs ``gc reset``."""
    STOPPING = "stopping"
    STOPPED = "stopped"


class DeletingJob(Enum):
    """Every kind of deletion the collector role makes (the daemon, ``gc
    collect``, ``gc spark``): what a pause holds (``gc.pause``). A new kind
    of deletion is a new member here, so ``gc status`` lists it."""

    L0 = "l0"
    """The sweep of L0 objects at or below ``M``."""
    JANITOR = "janitor"
    """What deleted topic incarnations left (``gc.janitor``)."""
    CONTROLLER_TRUNCATION = "controller_truncation"
    """The controller log entries a snapshot covers (the daemon's compaction)."""
    TIDYING = "tidying"
    """Reports of gone nodes, expired run summaries, presence documents of
    gone daemons (``gc.daemon.maintenance``, the daemon)."""

    @property
    def what(self) -> str:
        """The job as ``gc status`` and the logs name it."""
        return "L0 sweep" if self is DeletingJob.L0 else self.value.replace("_", " ")


@dataclass(frozen=True)
class HeldJob:
    """A deleting job that came due during a pause and did not run."""

    job: DeletingJob
    since: datetime
    """When it first came due during this pause (the holder's clock: for
    people, no decision uses it)."""


@dataclass(frozen=True)
class ControlDocument:
    """What operators asked of the collector."""

    paused: bool = False
    reason: str = ""
    updated_by: str = ""
    updated_at: datetime = _EPOCH
    reset_generation: int = 0
    """Bumped by ``gc reset``; a daemon that sees it grow clears its
    ``safety_blocked`` state and failure counters."""


def encode_control(doc: ControlDocument) -> bytes:
    """Control document bytes."""
    return documents.dump_document(
        {
            "v": CONTROL_VERSION,
            "paused": doc.paused,
            "reason": doc.reason,
            "updated_by": doc.updated_by,
            "updated_at": documents.format_time(doc.updated_at),
            "reset_generation": doc.reset_generation,
        }
    )


def decode_control(data: bytes, where: str = "gc control document") -> ControlDocument:
    """Parse a control document.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = documents.load_document(data, where, CONTROL_VERSION)
    paused = doc.get("paused")
    if not isinstance(paused, bool):
        raise MalformedRecordError(f"{where}: 'paused' must be true or false, got {paused!r}")
    return ControlDocument(
        paused=paused,
        reason=documents.get_optional_str(doc, "reason", where),
        updated_by=documents.get_optional_str(doc, "updated_by", where),
        updated_at=documents.parse_time(documents.get_str(doc, "updated_at", where), where),
        reset_generation=documents.get_int(doc, "reset_generation", where, 0),
    )


def read_control(store: ObjectStore, root: str) -> tuple[ControlDocument, str | None]:
    """The control document and its ETag (``None``: none written yet, which
    means running).

    Raises:
        MalformedRecordError, UnsupportedVersionError: a document we cannot
            trust; callers keep what they knew before.
    """
    key = gc_control_key(root)
    stored = get_or_none(store, key)
    if stored is None:
        return ControlDocument(), None
    return decode_control(stored.body, key), stored.etag


def paused_message(doc: ControlDocument) -> str | None:
    """``paused by WHO: REASON`` when ``doc`` says paused, else ``None``.
    Pure: the one wording of a pause (``gc.pause.PauseGuard`` decides with
    it, the Spark tasks' gate reports with it)."""
    if not doc.paused:
        return None
    return f"paused by {doc.updated_by or 'an operator'}: {doc.reason or 'no reason given'}"


def update_control(
    store: ObjectStore,
    root: str,
    change: Callable[[ControlDocument], ControlDocument],
    *,
    attempts: int = 10,
) -> ControlDocument:
    """Apply ``change`` with compare-and-swap (create-only when missing) and
    return the document written. Concurrent updates are re-read and
    re-applied, never lost.

    Raises:
        StorageError: the store failed, or ``attempts`` conflicts in a row.
    """
    key = gc_control_key(root)
    for _ in range(attempts):
        current, etag = read_control(store, root)
        new = change(current)
        try:
            if etag is None:
                store.put_if_absent(key, encode_control(new))
            else:
                store.put_if_match(key, encode_control(new), etag)
        except PreconditionFailedError:
            continue
        return new
    raise PreconditionFailedError(f"{key}: {attempts} concurrent updates in a row; try again")


def pause(store: ObjectStore, root: str, *, by: str, reason: str, now: datetime) -> ControlDocument:
    """Ask every collector to stop deleting (until ``resume``)."""
    return update_control(
        store,
        root,
        lambda doc: replace(doc, paused=True, reason=reason, updated_by=by, updated_at=now),
    )


def resume(store: ObjectStore, root: str, *, by: str, now: datetime) -> ControlDocument:
    """Undo ``pause``."""
    return update_control(
        store,
        root,
        lambda doc: replace(doc, paused=False, reason="", updated_by=by, updated_at=now),
    )


def request_reset(store: ObjectStore, root: str, *, by: str, now: datetime) -> ControlDocument:
    """Ask the collector to leave ``safety_blocked`` and retry (after the
    operator fixed what made ``M`` untrustworthy)."""
    return update_control(
        store,
        root,
        lambda doc: replace(
            doc, reset_generation=doc.reset_generation + 1, updated_by=by, updated_at=now
        ),
    )


@dataclass(frozen=True)
class StatusDocument:
    """What the GC lease holder last published about itself."""

    state: CollectorState
    holder: str
    updated_at: datetime
    safe_epoch: int | None = None
    cluster_epoch: int | None = None
    last_run_id: str | None = None
    last_outcome: str | None = None
    last_success_at: datetime | None = None
    next_round_at: datetime | None = None
    detail: str = ""
    last_round_at: datetime | None = None
    """When the last round finished (optional: absent from older writers)."""
    held: tuple[HeldJob, ...] = ()
    """The deleting jobs a pause holds (optional: absent from older writers)."""


def encode_status(doc: StatusDocument) -> bytes:
    """Status document bytes."""
    body: dict[str, Any] = {
        "v": STATUS_VERSION,
        "state": doc.state.value,
        "holder": doc.holder,
        "updated_at": documents.format_time(doc.updated_at),
        "safe_epoch": doc.safe_epoch,
        "cluster_epoch": doc.cluster_epoch,
        "last_run_id": doc.last_run_id,
        "last_outcome": doc.last_outcome,
        "last_success_at": _time_or_none(doc.last_success_at),
        "next_round_at": _time_or_none(doc.next_round_at),
        "detail": doc.detail,
        "last_round_at": _time_or_none(doc.last_round_at),
        "held": [{"job": h.job.value, "since": documents.format_time(h.since)} for h in doc.held],
    }
    return documents.dump_document(body)


def decode_status(data: bytes, where: str = "gc status document") -> StatusDocument:
    """Parse a status document.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = documents.load_document(data, where, STATUS_VERSION)
    state_text = documents.get_str(doc, "state", where)
    try:
        state = CollectorState(state_text)
    except ValueError as err:
        raise MalformedRecordError(f"{where}: unknown state {state_text!r}") from err
    return StatusDocument(
        state=state,
        holder=documents.get_str(doc, "holder", where),
        updated_at=documents.parse_time(documents.get_str(doc, "updated_at", where), where),
        safe_epoch=documents.get_optional_int(doc, "safe_epoch", where),
        cluster_epoch=documents.get_optional_int(doc, "cluster_epoch", where),
        last_run_id=_optional_or_none(doc, "last_run_id", where),
        last_outcome=_optional_or_none(doc, "last_outcome", where),
        last_success_at=_parse_optional_time(doc, "last_success_at", where),
        next_round_at=_parse_optional_time(doc, "next_round_at", where),
        detail=documents.get_optional_str(doc, "detail", where),
        last_round_at=_parse_optional_time(doc, "last_round_at", where),
        held=_held_jobs(doc, where),
    )


def write_status(store: ObjectStore, root: str, doc: StatusDocument) -> None:
    """Publish the holder's status (best effort: a failure is logged, since
    status is for people and must never stop collection)."""
    try:
        store.put(gc_status_key(root), encode_status(doc))
    except EpochGCError as err:
        log.warning("could not publish collector status: %s", err)


def read_status(store: ObjectStore, root: str) -> StatusDocument | None:
    """The last published status, or ``None`` when no daemon ever ran.

    Raises:
        MalformedRecordError, UnsupportedVersionError, StorageError.
    """
    key = gc_status_key(root)
    stored = get_or_none(store, key)
    return None if stored is None else decode_status(stored.body, key)


def _held_jobs(doc: dict[str, Any], where: str) -> tuple[HeldJob, ...]:
    """The ``held`` list; a job this version does not know is skipped (a
    newer writer's), a malformed entry refused."""
    known = {job.value: job for job in DeletingJob}
    held = []
    for entry in documents.get_list(doc, "held", where, absent_ok=True, objects=True):
        name = documents.get_str(entry, "job", where)
        since = documents.parse_time(documents.get_str(entry, "since", where), where)
        if name in known:
            held.append(HeldJob(known[name], since))
    return tuple(held)


def _optional_or_none(doc: dict[str, Any], name: str, where: str) -> str | None:
    return None if doc.get(name) is None else documents.get_optional_str(doc, name, where)


def _parse_optional_time(doc: dict[str, Any], name: str, where: str) -> datetime | None:
    text = _optional_or_none(doc, name, where)
    return None if text is None else documents.parse_time(text, where)


def _time_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else documents.format_time(moment)
