"""Typed configuration: built-in defaults, a TOML file, environment overrides.

Precedence, lowest first: the dataclass defaults below (``config/default.toml``
spells out the same values, and a test keeps the two equal), the file given
with ``--config``, then environment variables ``EPOCHGC_SECTION__KEY``.

Every value is checked before any work starts. A bad one (an unknown section
or key, a wrong type, a value out of range) raises ``ConfigError`` naming its
source (file or environment variable), the key and the reason; an unknown key
is an error rather than a warning because a misspelt safety setting (say
``min_object_age``) silently falling back to its default is exactly the kind
of mistake an operator cannot see.

Each section is a frozen dataclass; every field documents its unit and, where
it has one, its safety impact.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epochgc.errors import ConfigError
from epochgc.gc.spark.conf import conf_key_problem, conf_text, conf_value_problem
from epochgc.storage.keys import SHARD_COUNT_MAX, is_valid_node_id, is_valid_root
from epochgc.storage.stored_time import DEFAULT_MARGIN_SECONDS

ENV_PREFIX = "EPOCHGC_"
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ADDRESSING_STYLES = ("auto", "path", "virtual")
_IF_MATCH_FORMS = ("auto", "quoted", "bare")

Check = Callable[[Any], str | None]


def _check(fn: Check, **kwargs: Any) -> Any:
    """A dataclass field carrying its validator in the field metadata."""
    metadata = {"check": fn, **kwargs.pop("metadata", {})}
    return field(metadata=metadata, **kwargs)


_MINUTE = 60.0
_HOUR = 3600.0
_DAY = 86400.0
_YEAR = 365 * _DAY


def _number_text(value: float) -> str:
    """``3600`` rather than ``3600.0``, ``0.1`` as written."""
    return str(int(value)) if float(value).is_integer() else repr(value)


@dataclass(frozen=True)
class NumericRange:
    """A number's accepted values, ``lo..hi`` (and 0 meaning "none" when
    ``zero_is_off``). Every int and float setting has one, with a finite
    upper bound: a value the code cannot use (a TTL so long that the lease's
    expiry overflows a date) is refused at load, not met by every renewal.
    NaN is outside every range (it compares false both ways).
    """

    lo: float
    hi: float
    zero_is_off: bool = False

    def __call__(self, value: float) -> str | None:
        if self.zero_is_off and value == 0:
            return None
        if self.lo <= value <= self.hi:
            return None
        zero = "0 (none) or " if self.zero_is_off else ""
        return f"must be {zero}in {self.span()}, got {value}"

    def span(self) -> str:
        """``lo..hi``, as messages write it."""
        return f"{_number_text(self.lo)}..{_number_text(self.hi)}"

    def text(self) -> str:
        """How ``config/default.toml`` writes the range beside the key."""
        return f"0 or {self.span()}" if self.zero_is_off else self.span()


def _range(lo: float, hi: float) -> Check:
    return NumericRange(lo, hi)


def _zero_or_range(lo: float, hi: float) -> Check:
    return NumericRange(lo, hi, zero_is_off=True)


def _one_of(choices: tuple[str, ...]) -> Check:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}, got {v!r}"


def _bucket_name(value: str) -> str | None:
    if (
        3 <= len(value) <= 63
        and value.replace("-", "").replace(".", "").isalnum()
        and (value == value.lower())
    ):
        return None
    return f"not a valid S3 bucket name: {value!r}"


def _root(value: str) -> str | None:
    if is_valid_root(value):
        return None
    return (
        f"not a valid root prefix: {value!r} (non-empty, '/'-separated segments of "
        "[A-Za-z0-9._=-], no leading or trailing '/')"
    )


def _url_or_empty(value: str) -> str | None:
    if value == "" or value.startswith(("http://", "https://")):
        return None
    return f"must be empty (AWS) or an http(s):// URL, got {value!r}"


def _no_check(_value: Any) -> None:
    return None


_SPARK_CREDENTIALS = ("driver", "executor")
_SECRET_NAME = re.compile(r"(?i)secret|password|token")


def _spark_conf(value: dict[str, str]) -> str | None:
    for key, item in value.items():
        problem = conf_key_problem(key) or conf_value_problem(item)
        if problem is not None:
            return f"{key}: {problem}"
    return None


class _FieldError(ValueError):
    """A cross-field check failed; names the field to blame."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class _Section:
    """A configuration section: every field is checked when the section is
    built, whether loaded from a file or made in code (a test, the demo,
    ``dataclasses.replace``), so an invalid value never reaches a component.

    Raises ``_FieldError`` naming the field; the loader turns it into a
    ``ConfigError`` naming the file or variable the value came from.
    """

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            reason = f.metadata.get("check", _no_check)(getattr(self, f.name))
            if reason is not None:
                raise _FieldError(f.name, reason)
        self._check_together()

    def _check_together(self) -> None:
        """Checks across fields; a section with such a rule overrides it."""


@dataclass(frozen=True)
class StoreConfig(_Section):
    """Where the bucket is and how to talk to it."""

    bucket: str = _check(_bucket_name, default="epochgc")
    """The bucket holding every epochgc object."""
    endpoint_url: str = _check(_url_or_empty, default="")
    """Empty for AWS S3; else an S3-compatible endpoint. Ignored when ``embedded``."""
    region: str = _check(_no_check, default="us-east-1")
    embedded: bool = _check(_no_check, default=False)
    """Start an in-process S3 server (moto) on 127.0.0.1 and use it: no
    credentials, no network; the data lives only as long as the process."""
    embedded_port: int = _check(_range(0, 65535), default=0)
    """Port of the embedded server; 0 picks a free one."""
    access_key_id: str = _check(_no_check, default="")
    """Static credentials for S3-compatible stores; empty uses the AWS
    credential chain. Prefer the environment over a file for the secret."""
    secret_access_key: str = _check(_no_check, default="", repr=False)
    addressing_style: str = _check(_one_of(_ADDRESSING_STYLES), default="auto")
    connect_timeout_seconds: float = _check(_range(0.1, 5 * _MINUTE), default=5.0)
    read_timeout_seconds: float = _check(_range(0.1, _HOUR), default=30.0)
    max_pool_connections: int = _check(_range(1, 1024), default=32)
    max_attempts: int = _check(_range(1, 20), default=6)
    """Attempts per S3 request (transient errors are retried with full-jitter
    exponential backoff); then the operation fails with a typed error."""
    base_backoff_seconds: float = _check(_range(0.0, _MINUTE), default=0.05)
    max_backoff_seconds: float = _check(_range(0.0, _HOUR), default=5.0)
    delete_concurrency: int = _check(_range(1, 64), default=4)
    """DeleteObjects requests kept in flight by the bookkeeping deletes (the
    janitor, controller compaction, migrate); the L0 sweep's own is
    ``[gc] delete_concurrency``."""
    if_match_form: str = _check(_one_of(_IF_MATCH_FORMS), default="auto")
    """The ETag form sent in ``If-Match``: ``auto`` lets the capability
    probes find it (quoted for S3, bare for Ceph RGW 16); ``quoted`` or
    ``bare`` skips the search and is tested as is."""

    def _check_together(self) -> None:
        if self.base_backoff_seconds > self.max_backoff_seconds:
            raise _FieldError(
                "base_backoff_seconds",
                f"must not exceed max_backoff_seconds ({self.max_backoff_seconds})",
            )


@dataclass(frozen=True)
class LayoutConfig(_Section):
    """The bucket layout (docs/contract.md, "Bucket layout (layout 2)")."""

    root: str = _check(_root, default="epochgc")
    """Prefix of everything epochgc reads and writes. The collector only ever
    deletes keys that parse as ``{root}/l0/...``."""
    l0_shards: int = _check(_range(1, SHARD_COUNT_MAX), default=SHARD_COUNT_MAX)
    """Shards writers spread new L0 objects over (3 digits, so at most 1000).
    Each shard is a key prefix with its own S3 request-rate budget and the
    unit of GC work. The collector does not read it: it sweeps every shard
    present in the bucket (``gc/listing/shards.py``), so objects of another writer's
    count, or written before this value was lowered, are still collected."""


@dataclass(frozen=True)
class EpochConfig(_Section):
    """The cluster epoch (docs/architecture.md, "The bucket as a database")."""

    interval_seconds: float = _check(_range(0.01, _DAY), default=60.0)
    """How often the ticker appends ``epoch_tick``. Shorter intervals let
    ``M`` follow writes more closely (objects are collected sooner) at the
    cost of one controller-log object per tick."""
    cache_ttl_seconds: float = _check(_range(0.0, _DAY), default=30.0)
    """How long writers reuse a cluster epoch they read. A stale epoch is
    tolerated by the partitions' windows; keep it below ``interval_seconds``
    so a cached epoch lags by at most one."""
    ticker: bool = _check(_no_check, default=True)
    """This process (a GC daemon or a reconciler node) may hold the
    cluster's one ticker role (the lease ``ticker``); its holder ticks every
    ``interval_seconds``, the others stand by. Turn it off where a process
    must never write the controller log; keep it on in at least one process,
    or the epoch (and so ``M``) stops moving."""


@dataclass(frozen=True)
class LeaseConfig(_Section):
    """Leases (docs/architecture.md, "The bucket as a database"): partition leadership, reconciler
    ownership, the GC daemon's active role."""

    ttl_seconds: float = _check(_range(0.1, _HOUR), default=15.0)
    """Failover time after a holder crashes."""
    renew_interval_seconds: float = _check(_range(0.01, _HOUR), default=5.0)
    skew_margin_seconds: float = _check(_range(0.0, _HOUR), default=2.0)
    """A holder stops writing this long before its lease expires; must
    exceed the clock skew between processes."""

    def _check_together(self) -> None:
        if self.renew_interval_seconds + self.skew_margin_seconds >= self.ttl_seconds:
            raise _FieldError(
                "renew_interval_seconds",
                "renew_interval_seconds + skew_margin_seconds must be below ttl_seconds",
            )


@dataclass(frozen=True)
class OwnershipConfig(_Section):
    """Partition ownership by node leases (docs/operating.md, "Nodes,
    ownership and balance"): reconcilers lead the partitions their
    ownership records name. Node leases use ``[lease]``'s TTL, renew
    interval and skew margin."""

    max_moves_per_round: int = _check(_range(1, 100_000), default=128)
    """Takes plus hand-backs one node makes per ownership round. Bounds how
    much a restart or a join reshuffles at once, and how much a node that
    finds itself alone at start takes; keep it at or above partitions /
    nodes so a node takes its whole share in one round."""
    round_interval_seconds: float = _check(_range(0.1, _HOUR), default=5.0)
    """How often a node reads cluster state (one LIST page per 1000
    ownership records plus one per 1000 nodes) and moves partitions.
    Failover after a crash takes about the lease TTL (see
    ``use_store_timestamps``); a node that starts takes nothing for one
    interval, so the peers starting with it register first."""
    relist_records_seconds: float = _check(_range(0.0, _DAY), default=60.0)
    """A node that owns exactly its share, with nothing to move, lists only
    the nodes (one page) in a round; it lists the ownership records again
    when the live nodes or the partitions change, after a write of its own
    found a record changed, and at least this often (0: every round). What
    this bounds is how late a record changed by someone outside the protocol
    (an operator's hand edit) is noticed; partition terms keep any such
    change safe meanwhile."""
    use_store_timestamps: bool = _check(_no_check, default=True)
    """Judge when a peer's lease was last written from the store's
    LastModified stamps too (against this node's own lease in the same
    listing), not only from when this node first saw it: a dead node is
    then called gone a TTL after its last renewal, not up to a round later.
    It assumes the store stamps writes from clocks that agree within a
    second (plus the lease skew margin); turn it off for a store whose
    gateways' clocks may not (stamps found contradicting what a node saw
    turn it off by themselves, with a warning)."""


def _node_id_or_empty(value: str) -> str | None:
    if value == "" or is_valid_node_id(value):
        return None
    return f"must be empty (the host name) or match [A-Za-z0-9._-]{{1,64}}, got {value!r}"


@dataclass(frozen=True)
class ReconcilerConfig(_Section):
    """A reconciler node (``epochgc reconciler``)."""

    node_id: str = _check(_node_id_or_empty, default="")
    """This node's id in reports and lease holders; empty uses the host name.
    Keep it stable across restarts: it names the node's report."""
    round_interval_seconds: float = _check(_range(0.01, _HOUR), default=1.0)
    """Pause between rounds (lead, reconcile, housekeep, report)."""
    idle_interval_seconds: float = _check(_range(0.0, _DAY), default=30.0)
    """An idle, fully reconciled partition whose M(p) has not moved this long
    gets an advance_epoch, so it stops pinning the global M."""
    snapshot_every_entries: int = _check(_range(1, 10_000_000), default=1000)
    """Partition snapshot (and log truncation) period, in log entries."""
    reconcile_concurrency: int = _check(_range(1, 256), default=4)
    """Partitions of this node reconciled at once (each opens its replica
    and writes its L1 objects)."""
    max_records_per_pass: int = _check(_range(1, 100_000_000), default=100_000)
    """Records moved into one L1 object per pass."""
    append_depth: int = _check(_range(1, 256), default=8)
    """Partition-log appends a leader keeps in flight."""
    max_log_entries: int = _check(_range(0, 10**12), default=0)
    """A partition log longer than this is under space pressure: it is
    truncated up to lro whatever the retention hint asks (0: no cap)."""
    stuck_retry_seconds: float = _check(_range(0.0, _DAY), default=10.0)
    """A stuck partition (an L0 object missing or corrupt before it was
    reconciled) retries its read this often: the object may come back."""
    max_round_seconds: float = _check(_range(0.0, _DAY), default=0.0)
    """A loop of the node (its rounds; its ownership rounds) that completes
    no round for this long, plus its pause between rounds, stops the node:
    it renews its lease no more, lets go of its partitions and exits 1 for
    its supervisor to restart it (docs/operating.md, "A node that stops
    making progress"). 0: four ``[lease] ttl_seconds``. Keep it well above
    the longest round ``epochgc_reconciler_round_duration_seconds`` shows.
    No safety impact: it bounds how long a stuck node holds partitions."""


@dataclass(frozen=True)
class ProducerConfig(_Section):
    """The reference write path's batching (``epochgc produce``, the demo)."""

    linger_seconds: float = _check(_range(0.0, _MINUTE), default=0.25)
    """How long records wait for others to share their L0 object."""
    max_batch_bytes: int = _check(_range(1, 5 * 1024**3), default=4 * 1024 * 1024)
    """An L0 object is flushed as soon as this many record bytes wait."""
    depth: int = _check(_range(1, 256), default=8)
    """Chunks in flight per partition (acknowledged in order)."""


@dataclass(frozen=True)
class GcConfig(_Section):
    """The collector (docs/operating.md, "The collector's states")."""

    min_object_age_seconds: float = _check(_range(0.0, _YEAR), default=3600.0)
    """Objects younger than this are never deleted, whatever their epoch: a
    margin for clocks and slow writers (0 allowed)."""
    max_delete_fraction: float = _check(_range(0.0, 1.0), default=0.9)
    """A run that would delete more than this share of the L0 objects it
    lists stops unless forced. Below 1 the run lists shards to their end to
    count; 1 turns the guard off and stops each shard at its first key
    above M (cheaper)."""
    shard_concurrency: int = _check(_range(1, 256), default=8)
    delete_concurrency: int = _check(_range(1, 256), default=4)
    """DeleteObjects requests (1000 keys each) the L0 sweep keeps in flight:
    the collector's deletion throughput (``[store] delete_concurrency`` is
    the bookkeeping deletes')."""
    rate_limit_keys_per_second: float = _check(_zero_or_range(0.001, 1_000_000), default=0.0)
    """A hard cap on deletions per second (0: none; SlowDown still halves
    the rate). At least one key per 1000 s: a smaller cap, shared out over
    Spark tasks, underflows to a share no task can use."""
    maintenance_interval_seconds: float = _check(_range(1.0, 7 * _DAY), default=300.0)
    """How often the GC leader deletes reports of gone nodes (when that
    costs M nothing) and expired run summaries."""
    runs_retention_days: float = _check(_range(0.0, 3650), default=30.0)
    """Run summaries (with their dry-run plans and deletion records) older
    than this are deleted."""
    record_deletions: bool = True
    """Every deleting run writes the keys it deleted (Parquet, beside its
    summary), for ``gc explain`` and ``gc runs --deleted``: one PUT per run
    (per Spark task) and about 40 bytes a key."""
    max_lag_seconds: float = _check(_range(1.0, 30 * _DAY), default=3600.0)
    """The longest an eligible L0 object waits for its shard to be listed
    (while rounds run): the bound of the cost-aware schedule. Shorter costs
    more LISTs; safety does not depend on it."""
    full_sweep_interval_seconds: float = _check(_range(1.0, _YEAR), default=86400.0)
    """Every shard is listed at least this often, whatever the shard
    knowledge says: catches orphans written with an old epoch."""
    clock_skew_margin_seconds: float = _check(_range(0.0, _HOUR), default=DEFAULT_MARGIN_SECONDS)
    """A time another process wrote to the bucket (shard knowledge, node
    reports, presence, run summaries' store timestamps) that is ahead of
    this collector's clock by more than this is read as unknown, in the
    direction that keeps collection going (the shard is due, the full sweep
    is due, the document is stale), logged once per writer and counted
    (``EpochgcClockSkew``). Not ``[lease] skew_margin_seconds``: that one
    covers clock *rates* over a lease TTL; this one the *offset* between
    two hosts' wall clocks. Safety does not depend on it: deletion rests on
    M and each object's store timestamp."""


@dataclass(frozen=True)
class ReportsConfig(_Section):
    """Node reports (docs/architecture.md, "The safe epoch M")."""

    interval_seconds: float = _check(_range(0.01, _HOUR), default=10.0)
    """How often a node rewrites its report. The collector's M lags by up to
    this much."""
    dead_after_seconds: float = _check(_range(1.0, 30 * _DAY), default=600.0)
    """A report unchanged this long (as the GC leader saw it) is a gone
    node's; it is deleted once live nodes' reports cover all it says."""


def _gateway_or_empty(value: str) -> str | None:
    if value == "" or value.startswith(("http://", "https://")):
        return None
    return _listen_or_empty(value)


def _listen_or_empty(value: str) -> str | None:
    host, sep, port = value.rpartition(":")
    if value == "" or (sep and host and port.isdigit() and int(port) <= 65535):
        return None
    return f"must be empty (off) or host:port, got {value!r}"


@dataclass(frozen=True)
class DaemonConfig(_Section):
    """``epochgc daemon``: when rounds run and what else it does."""

    node_id: str = _check(_node_id_or_empty, default="")
    """Readable id of this daemon in its GC lease; empty: gc-{host name}."""
    interval_seconds: float = _check(_range(0.1, _DAY), default=60.0)
    """Longest wait between GC rounds."""
    after_progress_seconds: float = _check(_range(0.0, _DAY), default=1.0)
    """Wait after a round that deleted something (more may be eligible)."""
    after_failure_seconds: float = _check(_range(0.0, _DAY), default=10.0)
    misfire_grace_seconds: float = _check(_range(1.0, _DAY), default=30.0)
    """A round that could not start on time still runs if this late."""
    control_poll_seconds: float = _check(_range(0.1, _HOUR), default=5.0)
    """How often pause/resume/reset requests are read from the bucket (a
    pause stops a sweep in progress after its batches in flight)."""
    report_stale_seconds: float = _check(_range(0.0, 30 * _DAY), default=120.0)
    """A node report older than this is logged as stale (M may be stuck)."""
    blocked_after_failures: int = _check(_range(1, 1000), default=3)
    """Untrusted M computations in a row that make the collector
    safety_blocked until ``epochgc gc reset``."""
    presence_interval_seconds: float = _check(_range(1.0, _DAY), default=60.0)
    """How often each daemon rewrites its ``{root}/gc/daemons/{node_id}``
    presence document (one PUT; also on every change of role). ``gc
    status`` calls one stale after three intervals without a refresh."""


@dataclass(frozen=True)
class ControllerConfig(_Section):
    """Controller-log compaction (docs/contract.md, "Controller snapshot"),
    run by the GC daemon holding the ``gc`` lease and by ``epochgc controller compact``."""

    compact_interval_seconds: float = _check(_range(1.0, 30 * _DAY), default=3600.0)
    """Time between compactions: snapshot the controller log's fold, then
    delete the entries it covers (never the newest). Opening the controller
    costs one GET per entry written since the last compaction."""
    compact_min_entries: int = _check(_range(0, 10**9), default=1000)
    """Skip a scheduled compaction while fewer entries than this are above
    the snapshot (each compaction rewrites the whole snapshot)."""
    epoch_history: int = _check(_range(1, 10_000_000), default=10_000)
    """Epoch start times a snapshot keeps (10,000 one-minute ticks: about a
    week). Retention ages records of older epochs by an upper bound of their
    start, so a smaller value can keep records longer, never drop them early."""


@dataclass(frozen=True)
class MetricsConfig(_Section):
    """Prometheus exposition."""

    listen: str = _check(_listen_or_empty, default="127.0.0.1:9464")
    """Address of the daemon's /metrics and /healthz (empty: none; port 0:
    a free one)."""
    pushgateway: str = _check(_gateway_or_empty, default="")
    """Pushgateway (host:port or http(s):// URL) that one-shot runs (the
    Spark job) push their run metrics to; empty: no push."""


def _bucket_or_empty(value: str) -> str | None:
    return None if value == "" else _bucket_name(value)


@dataclass(frozen=True)
class InventoryConfig(_Section):
    """Where S3 Inventory reports of the bucket are delivered (AWS layout:
    ``{prefix}/{source_bucket}/{config_id}/...``)."""

    bucket: str = _check(_bucket_or_empty, default="")
    """Destination bucket of the reports; empty: ``store.bucket``."""
    prefix: str = _check(_no_check, default="inventory")
    """Destination prefix set in the inventory configuration (may be empty)."""
    config_id: str = _check(_node_id_or_empty, default="epochgc-l0")
    """The inventory configuration's id (its report name)."""
    source_bucket: str = _check(_bucket_or_empty, default="")
    """The inventoried bucket; empty: ``store.bucket``."""
    rows_per_file: int = _check(_range(1, 100_000_000), default=1_000_000)
    """Rows per data file written by ``epochgc inventory build``."""


SPARK_LOG_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")


@dataclass(frozen=True)
class SparkConfig(_Section):
    """``epochgc gc spark``."""

    master: str = _check(_no_check, default="local[*]")
    """Spark master for ``gc spark`` (``--master`` wins; under
    spark-submit the submit's master is used)."""
    listing_tasks: int = _check(_range(0, 100_000), default=0)
    """Tasks in listing mode (0: one per shard, at most 1000)."""
    ship: bool = _check(_no_check, default=True)
    """On a non-local master, ship the code zip and the packed environment
    (``epochgc spark package``) so bare workers need nothing installed;
    ``false`` when every worker already has epochgc, boto3 and pyarrow."""
    package_dir: str = _check(_no_check, default="")
    """Where ``gc spark`` finds (or builds) the shipped files; empty:
    ``~/.cache/epochgc/spark``."""
    credentials: str = _check(_one_of(_SPARK_CREDENTIALS), default="driver")
    """``driver``: the driver resolves the store credentials (the config's
    key pair or its AWS chain) and hands them to the executors' environment,
    never into the pickled tasks. ``executor``: tasks use the executors' own
    AWS chain (instance profile, IRSA, their environment)."""
    conf: dict[str, str] = _check(_spark_conf, default_factory=dict)  # noqa: RUF009
    """Spark settings for ``gc spark`` (``--conf KEY=VALUE`` wins)."""
    log_level: str = _check(_one_of(SPARK_LOG_LEVELS), default="WARN")
    """Spark's own log level on the driver, also under spark-submit
    (``--spark-log-level`` wins); epochgc's lines follow ``[logging]``."""


@dataclass(frozen=True)
class CostConfig(_Section):
    """Prices the collector models its cost at (docs/operating.md, "Cost");
    defaults: S3 Standard's published prices, in dollars."""

    list_price_per_1000: float = _check(_range(0.0, 1000.0), default=0.005)
    """LIST (and PUT, COPY, POST) requests, per 1000."""
    delete_price_per_1000: float = _check(_range(0.0, 1000.0), default=0.0)
    """DeleteObjects / DeleteObject requests, per 1000 (free on S3)."""
    get_price_per_1000: float = _check(_range(0.0, 1000.0), default=0.0004)
    """GET, HEAD and other requests, per 1000."""
    storage_price_per_gb_month: float = _check(_range(0.0, 1000.0), default=0.023)
    """Storage per GB (2^30 bytes) per month: what waiting eligible bytes cost."""


@dataclass(frozen=True)
class LoggingConfig(_Section):
    """Log output; ``--log-level`` on the command line wins."""

    level: str = _check(_one_of(("", *_LOG_LEVELS)), default="")
    """Empty: INFO for long-running processes (daemon, reconciler,
    embedded-s3), and for one-shot commands only warnings and progress
    lines unless ``-v``."""


@dataclass(frozen=True)
class Config:
    """The whole configuration, one section per subsystem."""

    store: StoreConfig = field(default_factory=StoreConfig)
    layout: LayoutConfig = field(default_factory=LayoutConfig)
    epoch: EpochConfig = field(default_factory=EpochConfig)
    lease: LeaseConfig = field(default_factory=LeaseConfig)
    ownership: OwnershipConfig = field(default_factory=OwnershipConfig)
    reconciler: ReconcilerConfig = field(default_factory=ReconcilerConfig)
    producer: ProducerConfig = field(default_factory=ProducerConfig)
    gc: GcConfig = field(default_factory=GcConfig)
    reports: ReportsConfig = field(default_factory=ReportsConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    inventory: InventoryConfig = field(default_factory=InventoryConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    cost: CostConfig = field(default_factory=CostConfig)

    def describe(self) -> dict[str, dict[str, Any]]:
        """The configuration as plain data with secrets masked (for logs)."""
        out: dict[str, dict[str, Any]] = {}
        for section in dataclasses.fields(self):
            values = dataclasses.asdict(getattr(self, section.name))
            for key in values:
                if "secret" in key and values[key]:
                    values[key] = "***"
                elif isinstance(values[key], dict):  # [spark] conf may name a secret
                    values[key] = {
                        k: "***" if _SECRET_NAME.search(k) else v for k, v in values[key].items()
                    }
            out[section.name] = values
        return out


_SECTIONS: dict[str, type[Any]] = {
    f.name: f.default_factory  # type: ignore[misc]
    for f in dataclasses.fields(Config)
}

_REPLACED_KEYS: dict[str, str] = {
    "reconciler.run_ticker": "[epoch] ticker",
    "daemon.run_ticker": "[epoch] ticker",
}
"""Keys that were removed, and what replaced them: an old file gets an
error that says what to write instead, not just "unknown key"."""


def _unknown_key(source: str, dotted: str, fields: Mapping[str, str]) -> ConfigError:
    replaced = _REPLACED_KEYS.get(dotted)
    if replaced is not None:
        return ConfigError(
            source,
            dotted,
            f"removed: replaced by {replaced} (whether this process may hold the "
            "cluster's single ticker role; one holder ticks for everyone); delete this key",
        )
    return ConfigError(source, dotted, f"unknown key (known: {', '.join(fields)})")


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Load and validate the configuration.

    Args:
        path: a TOML file, or ``None`` for defaults plus environment.
        env: the environment to read overrides from (``os.environ`` by default).

    Raises:
        ConfigError: unreadable file, bad TOML, unknown key, wrong type or
            out-of-range value; nothing has been started yet.
    """
    env = os.environ if env is None else env
    raw: dict[str, dict[str, tuple[Any, str]]] = {name: {} for name in _SECTIONS}
    if path is not None:
        _merge_file(Path(path), raw)
    _merge_env(env, raw)
    sections = {name: _build_section(name, cls, raw[name]) for name, cls in _SECTIONS.items()}
    return Config(**sections)


def _merge_file(path: Path, raw: dict[str, dict[str, tuple[Any, str]]]) -> None:
    source = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise ConfigError(
            source, "", "file not found (run from the folder it is in, or give its path)"
        ) from err
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(source, "", f"cannot read: {err}") from err
    except tomllib.TOMLDecodeError as err:
        where, reason = _toml_error_position(str(err))
        raise ConfigError(source, where, f"invalid TOML: {reason}") from err
    for section, values in data.items():
        if section not in _SECTIONS:
            raise ConfigError(source, section, f"unknown section (known: {', '.join(_SECTIONS)})")
        if not isinstance(values, dict):
            raise ConfigError(source, section, "must be a table ([section])")
        fields = _field_types(_SECTIONS[section])
        for key, value in values.items():
            dotted = f"{section}.{key}"
            if key not in fields:
                raise _unknown_key(source, dotted, fields)
            raw[section][key] = (_coerce_typed(value, fields[key], source, dotted), source)


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _toml_error_position(message: str) -> tuple[str, str]:
    """Split tomllib's message into ``line L, column C`` and the reason, so
    the position leads the line where an editor's eye looks for it."""
    found = _TOML_POSITION.search(message)
    if found is None:
        return "-", message
    return f"line {found.group(1)}, column {found.group(2)}", message[: found.start()]


def _merge_env(env: Mapping[str, str], raw: dict[str, dict[str, tuple[Any, str]]]) -> None:
    for name, text in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        if "__" not in name:
            _refuse_single_underscore(name)
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        source = f"environment {name}"
        if section not in _SECTIONS:
            raise ConfigError(source, section, f"unknown section (known: {', '.join(_SECTIONS)})")
        fields = _field_types(_SECTIONS[section])
        dotted = f"{section}.{key}"
        if key not in fields:
            raise _unknown_key(source, dotted, fields)
        raw[section][key] = (_parse_text(text, fields[key], source, dotted), source)


def _refuse_single_underscore(name: str) -> None:
    """``EPOCHGC_STORE_BUCKET`` looks like an override but is not one (the
    section and key are separated by two underscores): ignoring it would
    run with a setting the operator believes changed."""
    rest = name[len(ENV_PREFIX) :].lower()
    for section, cls in _SECTIONS.items():
        key = rest.removeprefix(f"{section}_")
        if key != rest and key in _field_types(cls):
            meant = f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
            raise ConfigError(
                f"environment {name}",
                f"{section}.{key}",
                f"not an override: section and key are separated by two underscores ({meant})",
            )


def _field_types(cls: type[Any]) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def _coerce_typed(value: Any, type_name: str, source: str, key: str) -> Any:
    if type_name == "bool":
        if isinstance(value, bool):
            return value
    elif type_name == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif type_name == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif type_name == "str" and isinstance(value, str):
        return value
    elif type_name == "dict[str, str]" and isinstance(value, dict):
        for name, item in value.items():
            problem = conf_key_problem(name) or conf_value_problem(item)
            if problem is not None:
                raise ConfigError(source, f"{key}.{name}", problem)
        return {name: conf_text(item) for name, item in value.items()}
    raise ConfigError(source, key, f"must be {type_name}, got {type(value).__name__} {value!r}")


def _parse_text(text: str, type_name: str, source: str, key: str) -> Any:
    try:
        if type_name == "bool":
            lowered = text.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if type_name == "int":
            return int(text.strip())
        if type_name == "float":
            return float(text.strip())
        if type_name == "dict[str, str]":
            # An inline TOML table, e.g. {"spark.executor.memory" = "2g"}.
            table = tomllib.loads(f"v = {text}")["v"]
            return _coerce_typed(table, type_name, source, key)
    except (ValueError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(source, key, f"must be {type_name}, got {text!r}") from err
    return text


def _build_section(name: str, cls: type[Any], values: dict[str, tuple[Any, str]]) -> Any:
    try:
        return cls(**{key: value for key, (value, _) in values.items()})
    except _FieldError as err:
        source = values.get(err.key, (None, "defaults"))[1]
        raise ConfigError(source, f"{name}.{err.key}", err.reason) from err


def log_level_of(config: Config) -> int:
    """The configured log level as a ``logging`` constant (INFO when left
    to the command)."""
    return int(getattr(logging, config.logging.level or "INFO"))
