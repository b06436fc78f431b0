"""Computing ``M`` from the bucket: the controller tail plus one object per
node (never one per partition), joined by ``aggregate.join_safe_epoch``."""

from __future__ import annotations

from epochgc.errors import EpochGCError
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.aggregate import SafeEpoch, SafeEpochTracker, join_safe_epoch
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.reports import read_reports


def compute_safe_epoch(
    controller: Controller,
    store: ObjectStore,
    root: str,
    tracker: SafeEpochTracker,
    *,
    pinning: int = 10,
) -> SafeEpoch | None:
    """One lazy computation of ``M``: the value the collector may use now,
    or ``None`` when the inputs could not be trusted (the tracker counts the
    failure and eventually reports ``safety_blocked``).

    A report that does not parse is skipped by the reader and so can only
    leave ``M`` lower; an unreadable controller entry fails the whole
    computation, because a topic snapshot it cannot trust cannot bound ``M``.
    """
    try:
        view = controller.snapshot()
        reports, _skipped = read_reports(store, root)
    except EpochGCError as err:
        tracker.failed(err)
        return None
    return tracker.observe(join_safe_epoch(view, reports, k=pinning))
