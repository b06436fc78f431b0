"""What ``epochgc gc status`` shows: the pure view over the documents it
read (control, published status, the ``gc`` and ``ticker`` leases, the
daemons' presence documents) and ``now``; and what ``epochgc gc epoch-info``
shows: the cluster epoch, ``M`` and the partitions that pin it
(``read_epoch_info``, the one function here that reads the bucket, and the
pure ``epoch_info_view``).

Why a view of its own: the published status is only what the last leader
said. After a crash it still says ``running``; shown alone beside "nobody
holds the lease" it contradicts itself. The view checks the status
against the lease, gives the age of every figure, and lists standby
daemons, so an operator reads one consistent story. While paused it lists
the deleting jobs the pause holds (every ``DeletingJob``), with when each
came due as the lease holder published it.

No clock: ``now`` is a parameter. ``expires_at`` of a lease is its
holder's wall clock: compared with ``now`` here only as a hint for people
(no decision uses it). The status's and the presence documents' times are
their writers' clocks too: one ahead of ``now`` by more than the skew
margin (``epochgc.storage.stored_time``) is shown as such, with no age, and a
presence document of unknown age counts as stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from epochgc.gc.control import CollectorState, ControlDocument, DeletingJob, StatusDocument
from epochgc.gc.presence import PresenceDocument
from epochgc.leases.role_leases import LeaseDocument
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.stored_time import (
    DEFAULT_MARGIN_SECONDS,
    is_from_future,
    skew_seconds,
    stored_age_seconds,
)
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import SafeEpoch
from epochgc.watermarks.safe_epoch.compute import compute_safe_epoch_once
from epochgc.watermarks.safe_epoch.reports import StuckCause
from epochgc.wording import counted


@dataclass(frozen=True)
class StatusInputs:
    """Everything ``gc status`` read from the bucket."""

    control: ControlDocument
    status: StatusDocument | None
    lease: LeaseDocument | None
    ticker: LeaseDocument | None
    daemons: Sequence[PresenceDocument] = ()
    unreadable_daemons: Sequence[str] = ()


def format_age(seconds: float) -> str:
    """A duration for people: ``42s``, ``5m``, ``3h``, ``2d`` (rounded down)."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds // 60:.0f}m"
    if seconds < 36 * 3600:
        return f"{seconds // 3600:.0f}h"
    return f"{seconds // 86400:.0f}d"


def is_lease_valid(lease: LeaseDocument | None, now: datetime) -> bool:
    """Held and not past its holder's stated expiry (a hint, see above)."""
    return lease is not None and not lease.released and lease.expires_at > now


def lease_data(lease: LeaseDocument | None, now: datetime) -> dict[str, object] | None:
    """A lease for the JSON output."""
    if lease is None:
        return None
    return {
        "holder": lease.holder,
        "term": lease.term,
        "expires_at": lease.expires_at,
        "expires_in_seconds": round((lease.expires_at - now).total_seconds(), 1),
        "valid": is_lease_valid(lease, now),
        "released": lease.released,
    }


def lease_line(lease: LeaseDocument | None, now: datetime, *, nobody: str) -> str:
    """One line about a lease: its holder and expiry, or who held it last."""
    if lease is None:
        return f"nobody holds it ({nobody})"
    if is_lease_valid(lease, now):
        left = format_age((lease.expires_at - now).total_seconds())
        return f"{lease.holder} (term {lease.term}), expires in {left}"
    ago = format_age((now - lease.expires_at).total_seconds())
    how = f"released {ago} ago" if lease.released else f"expired {ago} ago"
    return f"nobody holds it (last {lease.holder}, term {lease.term}, {how}; {nobody})"


def holder_holds_lease(inputs: StatusInputs, now: datetime) -> bool:
    """Whether the daemon that published the status still holds the lease."""
    return (
        inputs.status is not None
        and inputs.lease is not None
        and is_lease_valid(inputs.lease, now)
        and inputs.lease.holder == inputs.status.holder
    )


def status_view(inputs: StatusInputs, now: datetime) -> tuple[dict[str, object], list[str]]:
    """The JSON document and the lines ``gc status`` prints."""
    control, status, lease = inputs.control, inputs.status, inputs.lease
    holds = holder_holds_lease(inputs, now)
    data: dict[str, object] = {
        "control": {
            "paused": control.paused,
            "reason": control.reason,
            "updated_by": control.updated_by,
            "updated_at": control.updated_at if control.updated_by else None,
            "reset_generation": control.reset_generation,
        },
        "lease": lease_data(lease, now),
        "ticker": lease_data(inputs.ticker, now),
        "daemon": None if status is None else _status_data(status, now, holds),
        "daemons": [
            {
                "node": d.node,
                "holder": d.holder,
                "role": d.role,
                "state": d.state,
                "started_at": d.started_at,
                "updated_at": d.updated_at,
                "age_seconds": _rounded(d.age_seconds(now)),
                "stale": d.is_stale(now),
                "metrics": d.metrics,
            }
            for d in inputs.daemons
        ],
        "unreadable_daemons": list(inputs.unreadable_daemons),
        "held_jobs": [
            {"job": job.value, "what": job.what, "due_since": since}
            for job, since in held_jobs(inputs, now)
        ],
    }
    requested = (
        f"PAUSED by {control.updated_by} at {control.updated_at:%Y-%m-%d %H:%M:%SZ}"
        + (f" ({control.reason})" if control.reason else "")
        if control.paused
        else "running"
    )
    lines = [f"requested:  {requested}"]
    if control.paused:
        lines.append("held:       " + held_line(held_jobs(inputs, now), now))
    lines += [
        "gc lease:   " + lease_line(lease, now, nobody="no daemon running?"),
        "ticker:     "
        + lease_line(
            inputs.ticker,
            now,
            nobody="the epoch is not moving: no process with [epoch] ticker?",
        ),
    ]
    lines += _status_lines(status, lease, now, holds)
    lines += _daemon_lines(inputs, now)
    return data, lines


def held_jobs(inputs: StatusInputs, now: datetime) -> list[tuple[DeletingJob, datetime | None]]:
    """While paused, every deleting job (a pause holds them all) with when
    it came due and was held, as the lease holder published it (``None``:
    not due yet, or no current holder said); empty while running."""
    if not inputs.control.paused:
        return []
    status = inputs.status
    due = (
        {h.job: h.since for h in status.held}
        if status is not None and holder_holds_lease(inputs, now)
        else {}
    )
    return [(job, due.get(job)) for job in DeletingJob]


def held_line(jobs: list[tuple[DeletingJob, datetime | None]], now: datetime) -> str:
    """``L0 sweep (held since 3m ago), janitor (not due yet), ...``."""
    return ", ".join(
        f"{job.what} ({'not due yet' if since is None else 'held since ' + _ago(since, now)})"
        for job, since in jobs
    )


def _status_data(status: StatusDocument, now: datetime, holds: bool) -> dict[str, object]:
    return {
        "state": status.state.value,
        "holder": status.holder,
        "holder_holds_lease": holds,
        "updated_at": status.updated_at,
        "age_seconds": _rounded(stored_age_seconds(status.updated_at, now, SKEW_MARGIN)),
        "safe_epoch": status.safe_epoch,
        "cluster_epoch": status.cluster_epoch,
        "last_run_id": status.last_run_id,
        "last_outcome": status.last_outcome,
        "last_round_at": status.last_round_at,
        "last_success_at": status.last_success_at,
        "next_round_at": status.next_round_at,
        "detail": status.detail,
        "held": [{"job": h.job.value, "since": h.since} for h in status.held],
    }


SKEW_MARGIN = DEFAULT_MARGIN_SECONDS
"""``gc status`` is for people and reads no configuration: the default."""


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def _ahead(moment: datetime, now: datetime) -> str:
    return (
        f"at {moment:%Y-%m-%d %H:%M:%SZ}, {format_age(skew_seconds(moment, now))} "
        "ahead of this clock (a host's clock is wrong?)"
    )


def _ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "never"
    if is_from_future(moment, now, SKEW_MARGIN):
        return _ahead(moment, now)
    return f"{format_age((now - moment).total_seconds())} ago"


def _moment(moment: datetime | None, now: datetime, *, missing: str = "never") -> str:
    """A time and how far it is from ``now``: ``2026-11-24 05:00:00Z (5m ago)``."""
    if moment is None:
        return missing
    seconds = (now - moment).total_seconds()
    rel = f"{format_age(seconds)} ago" if seconds >= 0 else f"in {format_age(-seconds)}"
    return f"{moment:%Y-%m-%d %H:%M:%SZ} ({rel})"


def _status_lines(
    status: StatusDocument | None, lease: LeaseDocument | None, now: datetime, holds: bool
) -> list[str]:
    if status is None:
        return ["daemon:     no daemon has published a status yet"]
    state, holder, age = status.state.value, status.holder, _ago(status.updated_at, now)
    if holds or status.state is CollectorState.STOPPED:
        daemon = f"{state}, published by {holder} {age}"
    else:
        daemon = f"last published {state} by {holder} {age}; {holder} no longer holds the gc lease"
        if lease is not None and is_lease_valid(lease, now):
            daemon += f" ({lease.holder} does; its first round publishes a new status)"
        else:
            daemon += " (crashed or cut off from the bucket?)"
    last_round = f"{status.last_outcome or '-'} {status.last_run_id or ''}".rstrip()
    if status.last_round_at is not None:
        last_round += f", {_ago(status.last_round_at, now)}"
    lines = [
        f"daemon:     {daemon}",
        f"M:          {status.safe_epoch} (cluster epoch {status.cluster_epoch}), as of {age}",
        f"last round: {last_round}",
        f"last ok:    {_moment(status.last_success_at, now)}",
        f"next round: {_moment(status.next_round_at if holds else None, now, missing='-')}",
    ]
    if status.detail:
        lines.append(f"detail:     {status.detail}")
    return lines


def _daemon_lines(inputs: StatusInputs, now: datetime) -> list[str]:
    if not inputs.daemons and not inputs.unreadable_daemons:
        return ["daemons:    none running (no presence document under gc/daemons/)"]
    lines = []
    for d in inputs.daemons:
        age = d.age_seconds(now)
        seen = _ago(d.updated_at, now)
        text = f"{d.holder} {d.role}, {d.state}, seen {seen}"
        if d.metrics:
            text += f", metrics {d.metrics}"
        if age is None:
            text += "; STALE: refreshed at a time of unknown age"
        elif d.is_stale(now):
            text += f"; STALE: not refreshed for {format_age(age)} (crashed?)"
        lines.append(text)
    lines += [f"unreadable: {why}" for why in inputs.unreadable_daemons]
    return ["daemons:    " + lines[0], *("            " + line for line in lines[1:])]


@dataclass(frozen=True)
class EpochInfo:
    """What ``gc epoch-info`` read: the cluster epoch and ``M`` as a
    collector would compute it now."""

    cluster_epoch: int
    safe: SafeEpoch | None
    """``None``: the inputs of ``M`` cannot be trusted now."""
    untrusted: str = ""
    """Why ``safe`` is ``None`` (one line)."""


def read_epoch_info(store: ObjectStore, root: str, *, pinning: int = 10) -> EpochInfo:
    """Compute ``M`` with its ``pinning`` lowest partitions, then read the
    cluster epoch.

    Raises:
        StorageError: the store could not be read.
    """
    safe, untrusted = compute_safe_epoch_once(store, root, pinning=pinning)
    return EpochInfo(Controller(store, root).current_epoch(), safe, untrusted)


def epoch_info_view(cluster_epoch: int, safe: SafeEpoch) -> tuple[dict[str, object], list[str]]:
    """The JSON document and the lines ``gc epoch-info`` prints."""
    pinning = [
        {
            "topic": w.topic,
            "partition": w.partition,
            "safe_epoch": w.safe_epoch,
            "node": w.node,
            "stuck": None if w.stuck is None else w.stuck.to_json(),
        }
        for w in safe.pinning
    ]
    lag = cluster_epoch - safe.safe_epoch
    data: dict[str, object] = {
        "cluster_epoch": cluster_epoch,
        "safe_epoch": safe.safe_epoch,
        "lag": lag,
        "controller_offset": safe.controller_offset,
        "partitions": safe.partitions,
        "unreported_partitions": safe.unreported,
        "oldest_report_at": safe.oldest_report_at,
        "pinning": pinning,
    }
    lines = [
        f"cluster epoch {cluster_epoch}, M {safe.safe_epoch} (lag {lag}); "
        f"{counted(safe.partitions, 'live partition')}, {safe.unreported} without a report",
        f"{'pinning partition':40} {'M(p)':>8}  reported by",
    ]
    for w in safe.pinning:
        lines.append(
            f"{w.topic + '/' + str(w.partition):40} {w.safe_epoch:>8}  "
            f"{w.node or '(no report: revision - 1)'}"
        )
        if w.stuck is not None:
            lines.append(f"    {stuck_line(w.stuck)}")
    return data, lines


def stuck_line(stuck: StuckCause) -> str:
    """One line for a stuck partition's cause."""
    return (
        f"stuck: {stuck.cause} L0 object {stuck.key} (records "
        f"{stuck.first_offset}..{stuck.last_offset}) since {stuck.since:%Y-%m-%dT%H:%M:%SZ}"
    )
