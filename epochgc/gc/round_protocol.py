"""The one protocol every collection engine follows for a round: the local
engine (``collection_round``, ``epochgc gc collect`` and the daemon) and
the Spark job (``spark/job.py``, ``epochgc gc spark``) today, and a third
engine tomorrow.

1. **Open** (``open_round``): a run id and a start time, and ``M`` from
   trusted inputs only; untrusted inputs refuse the round
   (``SafetyBlockedError``) before anything is listed.
2. **Guarded passes** (``run_guarded_passes``): the engine's passes over
   the bucket, in an order no engine may change. The pause is read before
   the first deleting pass. With the delete-fraction guard on, a counting
   pass comes first, the guard's verdict on it may end the round with
   nothing deleted, and the pause is read again (one may have come during
   the count) before the deleting pass. A dry run plans instead of
   deleting and reads no pause.
3. **Summary**: the engine writes its run summary
   (``{root}/gc/runs/{run_id}/summary.json``); once deleting began, a
   summary that cannot be written is logged, not raised over the round's
   own failure (``write_summary_anyway``).

What differs between engines is only how a pass runs (threads over shards
in this process, tasks on executors): that is the ``GuardedPasses`` an
engine hands in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from epochgc.errors import EpochGCError, SafetyBlockedError
from epochgc.gc.control import DeletingJob
from epochgc.gc.pause import PauseGuard
from epochgc.gc.run_report import RunSummary, new_run_id, write_summary
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import SafeEpoch, SafeEpochTracker
from epochgc.watermarks.safe_epoch.compute import compute_safe_epoch

log = logging.getLogger(__name__)

PassResult = TypeVar("PassResult")


@dataclass(frozen=True)
class OpenedRound:
    """A round that may go on: who it is and the ``M`` it deletes up to."""

    run_id: str
    started_at: datetime
    safe: SafeEpoch
    """``M`` and where it came from (controller offset, pinning partitions)."""


def open_round(
    store: ObjectStore,
    root: str,
    *,
    tracker: SafeEpochTracker | None = None,
    controller: Controller | None = None,
    now: datetime | None = None,
    runtime: Runtime = SYSTEM,
) -> OpenedRound:
    """Step 1: a run id, the start time (``now``, or the wall clock) and
    ``M`` from trusted inputs (a long-lived caller passes its ``tracker``
    and ``controller`` so each round reads only what is new).

    Raises:
        SafetyBlockedError: ``M`` could not be computed from trusted inputs.
    """
    started = now or runtime.wall()
    tracker = tracker or SafeEpochTracker(blocked_after=1)
    controller = controller or Controller(store, root, runtime=runtime)
    safe = compute_safe_epoch(controller, store, root, tracker, runtime=runtime)
    if safe is None:
        raise SafetyBlockedError(untrusted_inputs_message(tracker))
    return OpenedRound(new_run_id(started, runtime.new_id), started, safe)


def untrusted_inputs_message(tracker: SafeEpochTracker) -> str:
    """The one line of a round blocked on untrusted ``M`` inputs: it names
    the input (the tracker's last error), so the operator knows what to fix
    before ``gc reset``."""
    return f"untrusted M inputs ({tracker.last_error}); nothing deleted"


def guard_message(eligible: int, listed: int, max_fraction: float, command: str) -> str | None:
    """Why the delete-fraction guard stops a round, or ``None`` when the
    share is within ``max_fraction``. Pure.

    The message names the one flag that bypasses the guard and nothing
    else (``--force`` unlocks nothing more)."""
    fraction = eligible / listed if listed else 0.0
    if not eligible or fraction <= max_fraction:
        return None
    return (
        f"would delete {eligible} of {listed} listed L0 objects ({fraction:.1%} > "
        f"max_delete_fraction {max_fraction:.0%}); nothing deleted; if that share is "
        f"expected, run `{command} --force` once (it bypasses only this guard)"
    )


class GuardedPasses(Protocol[PassResult]):
    """How one engine runs its passes over the bucket."""

    def count(self) -> PassResult:
        """List everything the round covers to its end and count what it
        would delete, deleting nothing."""
        ...

    def delete(self, counted: PassResult | None) -> PassResult:
        """Delete what is eligible (``counted``: the counting pass's
        result, when the guard ran one)."""
        ...

    def plan(self) -> PassResult:
        """A dry run: what would go, deleting nothing."""
        ...

    def listed_and_eligible(self, result: PassResult) -> tuple[int, int]:
        """What ``result`` listed and found eligible, for the guard."""
        ...


@dataclass(frozen=True)
class PassesOutcome(Generic[PassResult]):
    """What the passes did: the counting pass's result (guard on), the
    deleting or planning pass's (``None`` when the guard stopped the
    round), and the guard's verdict when it stopped it."""

    counted: PassResult | None
    done: PassResult | None
    stopped_by_guard: str | None


def run_guarded_passes(
    passes: GuardedPasses[PassResult],
    guard: PauseGuard,
    *,
    dry_run: bool,
    guarded: bool,
    max_delete_fraction: float,
    command: str,
    pause_read: bool = False,
) -> PassesOutcome[PassResult]:
    """Step 2 (module docstring).

    Args:
        dry_run: plan instead of deleting; no pause is read. With
            ``guarded``, the guard's verdict on the plan is reported (a
            dry run shows what a real round would do).
        guarded: the delete-fraction guard is on (``max_delete_fraction <
            1`` and no ``--force``).
        command: the command the guard's message tells to run with
            ``--force``.
        pause_read: the engine already read the pause when the round
            opened, before its planning, so the first read here is skipped.

    Raises:
        CollectorPausedError: the collector is paused.
    """
    if dry_run:
        planned = passes.plan()
        stopped = _verdict(passes, planned, max_delete_fraction, command) if guarded else None
        return PassesOutcome(None, planned, stopped)
    if not pause_read:
        guard.check(DeletingJob.L0)
    counted = None
    if guarded:
        counted = passes.count()
        stopped = _verdict(passes, counted, max_delete_fraction, command)
        if stopped is not None:
            return PassesOutcome(counted, None, stopped)
        guard.check(DeletingJob.L0)  # a pause may have come during the count
    return PassesOutcome(counted, passes.delete(counted), None)


def _verdict(
    passes: GuardedPasses[PassResult], result: PassResult, max_fraction: float, command: str
) -> str | None:
    listed, eligible = passes.listed_and_eligible(result)
    return guard_message(eligible, listed, max_fraction, command)


def write_summary_anyway(
    store: ObjectStore,
    root: str,
    summary: RunSummary,
    failure: BaseException | None,
    *,
    command: str,
) -> str:
    """Step 3: write the summary; when the round already failed, a summary
    that cannot be written is logged (``COMMAND RUN: could not write ...``),
    not raised over the round's own cause. Returns its key (``""`` when it
    could not be written)."""
    if failure is None:
        return write_summary(store, root, summary)
    try:
        return write_summary(store, root, summary)
    except EpochGCError as err:
        log.error("%s %s: could not write the run summary: %s", command, summary.run_id, err)
        return ""
