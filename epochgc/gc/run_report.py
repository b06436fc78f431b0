"""GC run reports: ``{root}/gc/runs/{run_id}/summary.json`` (docs/contract.md,
"Run summary (version 2)", a public contract) and listing recent runs.

Run ids sort by start time (``YYYYMMDDTHHMMSSZ-xxxxxxxx``), so listing the
runs prefix in key order lists runs oldest first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from epochgc.errors import EpochGCError, MalformedRecordError
from epochgc.gc.eligibility import Verdict
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.janitor import JanitorResult
from epochgc.gc.listing.cost import Prices, cost_per_gb
from epochgc.gc.sweeper import SweepResult
from epochgc.runtime import new_random_id
from epochgc.storage import documents
from epochgc.storage.keys import gc_run_prefix, gc_run_summary_key
from epochgc.storage.object_store import ObjectInfo, ObjectStore
from epochgc.storage.stored_time import DEFAULT_MARGIN_SECONDS, find_future, stored_age_seconds
from epochgc.wording import counted

SUMMARY_VERSION = 2
"""2 adds the ``janitor`` object; a version 1 summary reads as a run whose
janitor did nothing. ``cost`` and ``shards`` are optional fields added
within version 2 (older summaries have neither)."""
ENGINES = ("local", "spark-listing", "spark-inventory")
MAX_FAILED_FILES = 100
SHARD_REASONS = ("first_listing", "every_shard", "full_sweep", "schedule")
_SHARD_COUNTS = ("new", "due", "not_due", "quiet")
MAX_NAMED_KEYS = 100
NAMED_PREFIXES = 5
"""At most this many ``unparseable_keys`` are written or read."""
_SKIP_REASONS = tuple(verdict for verdict in Verdict if verdict is not Verdict.ELIGIBLE)
"""Every reason a listed object is kept, named in summaries by its value."""


@dataclass(frozen=True)
class RunShards:
    """Which shards a round listed (the cost-aware schedule's choice)."""

    present: int | None
    """Shards in the bucket, when the round ran the delimiter listing."""
    listed: int
    full_sweep: bool
    """Every shard present was listed."""
    why: str | None = None
    """``first_listing``, ``every_shard``, ``full_sweep`` or ``schedule``
    (``ShardChoice.why``); ``None`` in summaries written before it."""
    new: int = 0
    """Listed because nothing was known of them (schedule)."""
    due: int = 0
    """Listed because their interval was over (schedule)."""
    not_due: int = 0
    """Left unlisted: their interval is not over (schedule)."""
    quiet: int = 0
    """Left unlisted: ``M`` is below everything they hold (schedule)."""

    def describe(self) -> str:
        """One line for a person: how many shards, and why those."""
        of = f" of {self.present} present" if self.present is not None else ""
        head = f"listed {self.listed}{of}"
        if self.why == "first_listing":
            return f"{head}: every shard (nothing known of them yet: the first listing)"
        if self.why == "every_shard":
            return f"{head}: every shard (a dry run follows no listing schedule)"
        if self.why == "full_sweep":
            return f"{head}: every shard (a full sweep: due, or --all-shards)"
        if self.why == "schedule":
            found = "shards discovered" if self.present is not None else "no discovery needed"
            return (
                f"{head} by the cost schedule: {self.due} due, {self.new} new; "
                f"{self.not_due} not due yet, {self.quiet} holding nothing at or below M "
                f"({found})"
            )
        return head


def unparseable_note(summary: RunSummary, foreign: Sequence[str] = ()) -> str | None:
    """What a run says of the objects under ``{root}/l0/`` it will never
    delete, naming a few (``None``: there were none): keys that do not
    parse as L0 keys, and prefixes there that are not shards (``foreign``,
    from the shard discovery: never listed at all)."""
    count = summary.skipped.get(Verdict.UNPARSEABLE.value, 0)
    parts = []
    if count:
        named = ", ".join(summary.unparseable_keys)
        parts.append(
            f"{counted(count, 'key')} under l0/ that do not parse as L0 keys, never "
            f"deleted{': ' + named if named else ''}"
        )
    if foreign:
        shown = ", ".join(foreign[:NAMED_PREFIXES])
        parts.append(
            f"{counted(len(foreign), 'prefix', 'prefixes')} under l0/ that are not shards, "
            f"never listed: {shown}"
        )
    return "; ".join(parts) or None


def new_run_id(now: datetime, random_id: Callable[[], str] = new_random_id) -> str:
    """A sortable, unique run id: the start time, then 8 hex digits of
    ``random_id`` (the runtime's ids, so a simulated run names its rounds
    from its seed)."""
    return f"{now.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}-{random_id()[:8]}"


@dataclass(frozen=True)
class RunSummary:
    """One GC run, as written to ``summary.json``."""

    run_id: str
    engine: str
    dry_run: bool
    safe_epoch: int
    controller_offset: int
    started_at: datetime
    finished_at: datetime
    success: bool
    listed: int
    eligible: int
    deleted: int
    bytes_deleted: int
    skipped: Mapping[str, int]
    errors: int
    requests: Mapping[str, int] = field(default_factory=dict)
    janitor: JanitorResult = field(default_factory=JanitorResult)
    """What the janitor removed of deleted topic incarnations in this run."""
    cost_usd: float | None = None
    """The modelled dollars of ``requests`` at ``prices`` (``None``: a
    summary written without them)."""
    prices: Prices | None = None
    shards: RunShards | None = None
    cause: str | None = None
    """Why the run failed or stopped, in one line (optional field: a run
    that failed as a whole, e.g. an aborted Spark job or a pause mid-job)."""
    failed_files: tuple[tuple[str, str], ...] = ()
    """Inventory data files that could not be read: (key, cause); the first
    ``MAX_FAILED_FILES`` (optional field)."""
    unparseable_keys: tuple[str, ...] = ()
    """A few of the keys under ``{root}/l0/`` that do not parse as L0 keys
    (never deleted; ``skipped["unparseable"]`` counts them all). Optional
    field added within version 2."""

    @staticmethod
    def of_sweep(
        run_id: str,
        engine: str,
        sweep: SweepResult,
        *,
        controller_offset: int,
        started_at: datetime,
        finished_at: datetime,
        dry_run: bool,
        requests: Mapping[str, int],
    ) -> RunSummary:
        """The summary of a finished sweep."""
        skipped = {verdict.value: sweep.skipped.get(verdict, 0) for verdict in _SKIP_REASONS}
        return RunSummary(
            run_id=run_id,
            engine=engine,
            dry_run=dry_run,
            safe_epoch=sweep.safe_epoch,
            controller_offset=controller_offset,
            started_at=started_at,
            finished_at=finished_at,
            success=sweep.errors == 0,
            listed=sweep.listed,
            eligible=sweep.eligible,
            deleted=sweep.deleted,
            bytes_deleted=sweep.bytes_deleted,
            skipped=skipped,
            errors=sweep.errors,
            requests=dict(requests),
            unparseable_keys=tuple(sweep.unparseable_keys),
        )


def encode_summary(summary: RunSummary) -> bytes:
    """``summary.json`` bytes, exactly the fields of docs/contract.md, "Run summary (version 2)"."""
    if summary.engine not in ENGINES:
        raise ValueError(f"unknown engine {summary.engine!r}")
    doc: dict[str, Any] = {
        "v": SUMMARY_VERSION,
        "run_id": summary.run_id,
        "engine": summary.engine,
        "dry_run": summary.dry_run,
        "safe_epoch": summary.safe_epoch,
        "controller_offset": summary.controller_offset,
        "started_at": documents.format_time(summary.started_at),
        "finished_at": documents.format_time(summary.finished_at),
        "success": summary.success,
        "listed": summary.listed,
        "eligible": summary.eligible,
        "deleted": summary.deleted,
        "bytes_deleted": summary.bytes_deleted,
        "skipped": {v.value: int(summary.skipped.get(v.value, 0)) for v in _SKIP_REASONS},
        "errors": summary.errors,
        "requests": dict(summary.requests),
        "janitor": {
            "incarnations": summary.janitor.incarnations,
            "objects_deleted": summary.janitor.objects_deleted,
            "complete": summary.janitor.complete,
        },
    }
    if summary.cost_usd is not None:
        cost: dict[str, Any] = {"requests_usd": round(summary.cost_usd, 9)}
        if summary.prices is not None:
            cost["prices"] = summary.prices.as_dict()
        doc["cost"] = cost
    if summary.shards is not None:
        shards: dict[str, Any] = {
            "listed": summary.shards.listed,
            "full_sweep": summary.shards.full_sweep,
        }
        if summary.shards.present is not None:
            shards["present"] = summary.shards.present
        if summary.shards.why is not None:
            shards["why"] = summary.shards.why
            if summary.shards.why == "schedule":
                shards.update({name: getattr(summary.shards, name) for name in _SHARD_COUNTS})
        doc["shards"] = shards
    if summary.unparseable_keys:
        doc["unparseable_keys"] = list(summary.unparseable_keys[:MAX_NAMED_KEYS])
    doc.update(_failure_fields(summary))
    return documents.dump_document(doc)


def _failure_fields(summary: RunSummary) -> dict[str, Any]:
    """The optional fields of a failed run (absent when not set)."""
    doc: dict[str, Any] = {}
    if summary.cause:
        doc["cause"] = summary.cause
    if summary.failed_files:
        doc["failed_files"] = [
            {"key": key, "cause": cause} for key, cause in summary.failed_files[:MAX_FAILED_FILES]
        ]
    return doc


def _decode_failed_files(doc: dict[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    raw = doc.get("failed_files", [])
    if not isinstance(raw, list) or not all(
        isinstance(e, dict) and isinstance(e.get("key"), str) and isinstance(e.get("cause"), str)
        for e in raw
    ):
        raise MalformedRecordError(f"{where}: 'failed_files' must be a list of {{key, cause}}")
    return tuple((e["key"], e["cause"]) for e in raw)


def decode_summary(data: bytes, where: str = "gc run summary") -> RunSummary:
    """Parse ``summary.json``.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = documents.load_document(data, where, SUMMARY_VERSION)
    skipped = doc.get("skipped", {})
    requests = doc.get("requests", {})
    if not isinstance(skipped, dict) or not isinstance(requests, dict):
        raise MalformedRecordError(f"{where}: 'skipped' and 'requests' must be objects")
    for name in ("dry_run", "success"):
        if not isinstance(doc.get(name), bool):
            raise MalformedRecordError(f"{where}: {name!r} must be true or false")
    raw_janitor = doc.get("janitor", {})
    if not isinstance(raw_janitor, dict) or not isinstance(raw_janitor.get("complete", True), bool):
        raise MalformedRecordError(f"{where}: 'janitor' must be an object")
    janitor = JanitorResult(
        incarnations=documents.get_int(raw_janitor, "incarnations", where, 0) if raw_janitor else 0,
        objects_deleted=documents.get_int(raw_janitor, "objects_deleted", where, 0)
        if raw_janitor
        else 0,
        complete=bool(raw_janitor.get("complete", True)),
    )
    cost_usd, prices = _decode_cost(doc["cost"], where) if "cost" in doc else (None, None)
    return RunSummary(
        run_id=documents.get_str(doc, "run_id", where),
        engine=documents.get_str(doc, "engine", where),
        dry_run=bool(doc["dry_run"]),
        safe_epoch=documents.get_int(doc, "safe_epoch", where),
        controller_offset=documents.get_int(doc, "controller_offset", where),
        started_at=documents.parse_time(documents.get_str(doc, "started_at", where), where),
        finished_at=documents.parse_time(documents.get_str(doc, "finished_at", where), where),
        success=bool(doc["success"]),
        listed=documents.get_int(doc, "listed", where, 0),
        eligible=documents.get_int(doc, "eligible", where, 0),
        deleted=documents.get_int(doc, "deleted", where, 0),
        bytes_deleted=documents.get_int(doc, "bytes_deleted", where, 0),
        skipped={str(k): documents.get_int(skipped, k, where, 0) for k in skipped},
        errors=documents.get_int(doc, "errors", where, 0),
        requests={str(k): documents.get_int(requests, k, where, 0) for k in requests},
        janitor=janitor,
        cause=doc["cause"] if isinstance(doc.get("cause"), str) else None,
        failed_files=_decode_failed_files(doc, where),
        cost_usd=cost_usd,
        prices=prices,
        shards=_decode_shards(doc["shards"], where) if "shards" in doc else None,
        unparseable_keys=_decode_keys(doc, "unparseable_keys", where),
    )


def _decode_keys(doc: dict[str, Any], name: str, where: str) -> tuple[str, ...]:
    raw = doc.get(name, [])
    if not isinstance(raw, list) or not all(isinstance(key, str) for key in raw):
        raise MalformedRecordError(f"{where}: {name!r} must be a list of keys")
    return tuple(raw[:MAX_NAMED_KEYS])


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise MalformedRecordError(f"{what} must be a number >= 0, got {value!r}")
    return float(value)


def _decode_cost(raw: object, where: str) -> tuple[float | None, Prices | None]:
    if not isinstance(raw, dict):
        raise MalformedRecordError(f"{where}: 'cost' must be an object")
    usd = _number(raw.get("requests_usd"), f"{where}: cost.requests_usd")
    if "prices" not in raw:
        return usd, None
    raw_prices = raw["prices"]
    if not isinstance(raw_prices, dict):
        raise MalformedRecordError(f"{where}: cost.prices must be an object")
    defaults = Prices().as_dict()
    values = {
        name: _number(raw_prices.get(name, default), f"{where}: cost.prices.{name}")
        for name, default in defaults.items()
    }
    return usd, Prices(
        list_per_1000=values["list_per_1000"],
        delete_per_1000=values["delete_per_1000"],
        get_per_1000=values["get_per_1000"],
        storage_per_gb_month=values["storage_per_gb_month"],
    )


def _decode_shards(raw: object, where: str) -> RunShards:
    if not isinstance(raw, dict) or not isinstance(raw.get("full_sweep"), bool):
        raise MalformedRecordError(f"{where}: 'shards' must be an object with 'full_sweep'")
    why = raw.get("why")
    if why is not None and why not in SHARD_REASONS:
        raise MalformedRecordError(f"{where}: shards.why must be one of {SHARD_REASONS}")
    return RunShards(
        present=documents.get_int(raw, "present", where, 0) if "present" in raw else None,
        listed=documents.get_int(raw, "listed", where, 0),
        full_sweep=bool(raw["full_sweep"]),
        why=why,
        **{name: documents.get_int(raw, name, where, 0) for name in _SHARD_COUNTS if name in raw},
    )


def write_summary(store: ObjectStore, root: str, summary: RunSummary) -> str:
    """Write the summary; return its key."""
    key = gc_run_summary_key(root, summary.run_id)
    store.put(key, encode_summary(summary))
    return key


def run_files(store: ObjectStore, root: str) -> dict[str, list[ObjectInfo]]:
    """Run id -> the files of that run (summary, plan, deletion record parts)."""
    prefix = f"{root}/gc/runs/"
    runs: dict[str, list[ObjectInfo]] = {}
    for info in store.list_objects(prefix):
        run_id = info.key[len(prefix) :].split("/", 1)[0]
        runs.setdefault(run_id, []).append(info)
    return runs


def run_started_at(run_id: str) -> datetime | None:
    """When a run started, from its id; ``None`` for an id not of this shape."""
    try:
        return datetime.strptime(run_id.split("-", 1)[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def expired_runs(
    stored_at: Mapping[str, datetime],
    now: datetime,
    retention: timedelta,
    margin_seconds: float = DEFAULT_MARGIN_SECONDS,
) -> list[str]:
    """Runs stored more than ``retention`` before ``now``. Pure.

    ``stored_at`` maps each run id to the newest store timestamp
    (LastModified) of its files. Why not the time in the run id: that is
    the writing collector's clock, and a collector whose clock ran 40 days
    behind would have its fresh summaries deleted at once; the store's
    timestamps are one clock for every writer. A timestamp ahead of ``now``
    by more than ``margin_seconds`` is unknown and its run is kept
    (``epochgc.storage.stored_time``). An id that does not name a start time
    (written by something else) is kept."""
    return sorted(
        run_id
        for run_id, at in stored_at.items()
        if run_started_at(run_id) is not None
        and (age := stored_age_seconds(at, now, margin_seconds)) is not None
        and age > retention.total_seconds()
    )


def delete_expired_runs(
    store: ObjectStore,
    root: str,
    now: datetime,
    retention: timedelta,
    *,
    limit: int = 1000,
    margin_seconds: float = DEFAULT_MARGIN_SECONDS,
    future_log: FutureTimeLog | None = None,
) -> int:
    """Delete every file of up to ``limit`` runs stored more than
    ``retention`` ago (oldest first); return how many runs went. Store
    timestamps ahead of ``now`` go to ``future_log`` (this clock is behind
    the store's)."""
    files = run_files(store, root)
    stored_at = {run_id: max(i.last_modified for i in infos) for run_id, infos in files.items()}
    if future_log is not None:
        future_log.note(
            found
            for run_id, at in stored_at.items()
            if (found := find_future("run", "the store", run_id, at, now, margin_seconds))
        )
    victims = expired_runs(stored_at, now, retention, margin_seconds)[:limit]
    keys = [info.key for run_id in victims for info in files[run_id]]
    if keys:
        store.delete_many(keys).raise_for_failures()
    return len(victims)


def run_is_kept(store: ObjectStore, root: str, run_id: str) -> bool:
    """Whether any file of ``run_id`` is in the bucket (one LIST).

    Raises:
        ValueError: ``run_id`` is not a run id.
    """
    return next(iter(store.list_objects(gc_run_prefix(root, run_id))), None) is not None


def list_runs(store: ObjectStore, root: str, limit: int = 20) -> list[str]:
    """The newest ``limit`` run ids (oldest first)."""
    return sorted(run_files(store, root))[-limit:]


def recent_runs(
    store: ObjectStore, root: str, prices: Prices, limit: int = 20
) -> list[dict[str, object]]:
    """The newest ``limit`` runs (oldest first), one row each as ``epochgc
    gc runs --json`` prints them: the summary's contract fields plus its
    modelled ``cost_usd`` and ``usd_per_gb`` (``run_cost``), or ``run_id``
    and ``error`` for a run whose summary cannot be read (not written yet,
    or not a summary this version reads): one bad summary never hides the
    others."""
    rows: list[dict[str, object]] = []
    for run_id in list_runs(store, root, limit):
        try:
            summary = decode_summary(store.get(gc_run_summary_key(root, run_id)).body)
        except EpochGCError as err:
            rows.append({"run_id": run_id, "error": str(err)})
            continue
        row = json.loads(encode_summary(summary))
        row["cost_usd"], row["usd_per_gb"] = run_cost(summary, prices)
        rows.append(row)
    return rows


def run_cost(summary: RunSummary, prices: Prices) -> tuple[float, float | None]:
    """A run's modelled request cost in dollars, and dollars per GB
    reclaimed (``None`` when it reclaimed nothing). A summary written
    without a cost (version 1, or before cost was recorded) is priced from
    its ``requests`` at ``prices``."""
    usd = summary.cost_usd
    if usd is None:
        usd = prices.request_cost(summary.requests)
    return usd, cost_per_gb(usd, summary.bytes_deleted)


def run_figures(summary: RunSummary, seconds: float) -> dict[str, float]:
    """The figures a run pushes (``metrics.push.RUN_GAUGES``)."""
    return {
        "safe_epoch": summary.safe_epoch,
        "listed_objects": summary.listed,
        "eligible_objects": summary.eligible,
        "deleted_objects": summary.deleted,
        "deleted_bytes": summary.bytes_deleted,
        "errors": summary.errors,
        "duration_seconds": seconds,
        "success": int(summary.success),
        "last_completion_timestamp_seconds": summary.finished_at.timestamp(),
        "request_cost_dollars": summary.cost_usd or 0.0,
    }
