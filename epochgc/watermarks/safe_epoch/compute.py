"""Computing ``M`` from the bucket: the controller tail plus one object per
node (never one per partition), joined by ``aggregate.join_safe_epoch``."""

from __future__ import annotations

from epochgc.errors import CorruptLogError, InvariantViolation, RecordError
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import (
    SafeEpoch,
    SafeEpochTracker,
    join_safe_epoch,
)
from epochgc.watermarks.safe_epoch.reports import read_reports

UNTRUSTED_CONTENT_ERRORS = (RecordError, CorruptLogError, InvariantViolation)
"""What makes ``M``'s inputs untrusted: stored content that does not parse,
has an unknown ``v``, or contradicts the log's own invariants. Only these
count toward ``safety_blocked``."""


def compute_safe_epoch(
    controller: Controller,
    store: ObjectStore,
    root: str,
    tracker: SafeEpochTracker,
    *,
    pinning: int = 10,
    runtime: Runtime = SYSTEM,
) -> SafeEpoch | None:
    """One lazy computation of ``M``: the value the collector may use now,
    or ``None`` when the inputs could not be trusted (the tracker counts the
    failure and eventually reports ``safety_blocked``).

    A report that does not parse is skipped by the reader and so can only
    leave ``M`` lower; an unreadable controller entry fails the whole
    computation, because a topic snapshot it cannot trust cannot bound ``M``.
    A store that cannot be read (throttled, down, a missing bucket, denied
    access) says nothing about the content: its error propagates, the round
    fails and a later one retries, and it never counts toward
    ``safety_blocked``.

    Raises:
        StorageError: the store could not be read (transient or permanent).
    """
    try:
        view = controller.snapshot()
        reports, _skipped = read_reports(store, root, runtime=runtime)
    except UNTRUSTED_CONTENT_ERRORS as err:
        tracker.failed(err)
        return None
    return tracker.observe(join_safe_epoch(view, reports, k=pinning))


def compute_safe_epoch_once(
    store: ObjectStore, root: str, *, pinning: int = 10
) -> tuple[SafeEpoch | None, str]:
    """``M`` as a collector would compute it now, for an operator's
    question (``gc epoch-info``, ``gc explain``): the value, or ``None`` and
    why its inputs cannot be trusted (one line). Nothing is remembered
    between calls: a fresh tracker, blocked at the first untrusted input.

    Raises:
        StorageError: the store could not be read (transient or permanent).
    """
    tracker = SafeEpochTracker(blocked_after=1)
    safe = compute_safe_epoch(Controller(store, root), store, root, tracker, pinning=pinning)
    return safe, tracker.last_error
