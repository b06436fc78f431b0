"""The bucket settings that defeat a collector (docs/operating.md, "Bucket
settings").

A collector that deletes on the wrong bucket reclaims nothing, or cannot
delete at all, and every request still succeeds or fails without saying
why:

* **Versioning** enabled (or suspended after being enabled): DeleteObjects
  only adds a delete marker; the L0 bytes stay as a noncurrent version and
  are billed until a lifecycle rule expires noncurrent versions under
  ``{root}/l0/``.
* **No abort rule for incomplete multipart uploads** under ``{root}/l0/``:
  an upload a producer never completed is not an object, so no listing
  shows it and no collector deletes it; its parts are billed forever.
* **Object lock** (with or without a default retention): deletes of locked
  versions fail, so every round would fail its deletes.

``assess_bucket_settings`` is pure (settings in, findings out);
``read_bucket_settings`` reads them (four requests: versioning, lifecycle,
object lock, and one page of the L0 prefix's versions to name the bytes
that stay).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from epochgc.errors import AccessDeniedError, BucketSettingsError, NotFoundError, StorageError
from epochgc.storage.keys import l0_prefix
from epochgc.storage.s3 import S3ObjectStore
from epochgc.wording import counted, human_bytes

if TYPE_CHECKING:
    from mypy_boto3_s3.type_defs import LifecycleRuleTypeDef

log = logging.getLogger(__name__)

ABORT_INCOMPLETE_UPLOADS: LifecycleRuleTypeDef = {
    "ID": "abort-incomplete-uploads",
    "Status": "Enabled",
    "Filter": {"Prefix": ""},
    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
}
"""The lifecycle rule every bucket should have (the embedded S3's buckets
have it): an incomplete multipart upload is aborted after a day."""

DOCS = "docs/operating.md, 'Bucket settings'"
"""Where a finding sends the operator (docs/operating.md, "Bucket settings")."""


class Severity(Enum):
    """How much a finding matters: ``ERROR`` stops a daemon before any round."""

    OK = "ok"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Finding:
    """One setting, judged."""

    name: str
    severity: Severity
    detail: str


@dataclass(frozen=True)
class NoncurrentVersions:
    """What one page of the L0 prefix's versions showed."""

    versions: int
    bytes: int
    delete_markers: int
    complete: bool
    """The page held every version under the prefix (the figures are totals)."""


@dataclass(frozen=True)
class BucketSettings:
    """The settings as read; ``None``: could not be read (see ``unreadable``)."""

    versioning: str | None
    """``Enabled``, ``Suspended`` or ``""`` (never enabled)."""
    lifecycle_rules: Sequence[Mapping[str, Any]] | None
    object_lock: Mapping[str, Any] | None
    """The ``ObjectLockConfiguration`` (empty: none)."""
    noncurrent: NoncurrentVersions | None = None
    unreadable: Mapping[str, str] = field(default_factory=dict)
    """Setting -> why it could not be read (one line)."""


def rule_covers(rule: Mapping[str, Any], prefix: str) -> bool:
    """Whether an enabled lifecycle rule applies to every object under
    ``prefix``. A rule filtered by tags or by object size does not: L0
    objects carry no tags, and a size bound leaves some of them out."""
    if rule.get("Status") != "Enabled":
        return False
    rule_prefix = rule.get("Prefix", "")  # the filter's older form
    flt = rule.get("Filter")
    if flt is not None:
        conditions = flt.get("And", flt)
        if any(k in conditions for k in ("Tag", "Tags", "ObjectSizeGreaterThan")):
            return False
        if "ObjectSizeLessThan" in conditions:
            return False
        rule_prefix = conditions.get("Prefix", "")
    return prefix.startswith(rule_prefix or "")


def assess_bucket_settings(settings: BucketSettings, root: str) -> list[Finding]:
    """Judge each setting for a collector deleting under ``{root}/l0/``."""
    prefix = l0_prefix(root)
    rules = [r for r in settings.lifecycle_rules or () if rule_covers(r, prefix)]
    return [
        _versioning(settings, prefix, rules),
        _multipart(settings, prefix, rules),
        _object_lock(settings),
    ]


def _unreadable(settings: BucketSettings, name: str, action: str) -> Finding | None:
    why = settings.unreadable.get(name)
    if why is None:
        return None
    return Finding(name, Severity.WARNING, f"could not be read ({why}); grant {action} to check it")


def _versioning(settings: BucketSettings, prefix: str, rules: list[Mapping[str, Any]]) -> Finding:
    name = "versioning"
    unknown = _unreadable(settings, name, "s3:GetBucketVersioning")
    if unknown is not None:
        return unknown
    state = settings.versioning or "never enabled"
    if settings.versioning not in ("Enabled", "Suspended"):
        return Finding(name, Severity.OK, f"{state}: a delete removes the object's bytes")
    if any("NoncurrentVersionExpiration" in r for r in rules):
        return Finding(
            name,
            Severity.OK,
            f"{state}, and a lifecycle rule expires noncurrent versions under {prefix}",
        )
    if settings.lifecycle_rules is None:
        return Finding(
            name,
            Severity.WARNING,
            f"{state}, and the lifecycle rules could not be read: unless a rule expires "
            f"noncurrent versions under {prefix}, every L0 object deleted keeps its bytes "
            f"as a noncurrent version ({DOCS})",
        )
    return Finding(
        name,
        Severity.WARNING,
        f"{state} with no lifecycle rule expiring noncurrent versions under {prefix}: "
        f"every L0 object epochgc deletes keeps its bytes as a noncurrent version, "
        f"billed until removed{_already(settings.noncurrent)}; add the rule ({DOCS})",
    )


def _already(noncurrent: NoncurrentVersions | None) -> str:
    if noncurrent is None or not (noncurrent.versions or noncurrent.delete_markers):
        return ""
    scope = "" if noncurrent.complete else " in the first page listed"
    return (
        f" (already {counted(noncurrent.versions, 'noncurrent version')}, "
        f"{human_bytes(noncurrent.bytes)}, and "
        f"{counted(noncurrent.delete_markers, 'delete marker')}{scope})"
    )


def _multipart(settings: BucketSettings, prefix: str, rules: list[Mapping[str, Any]]) -> Finding:
    name = "incomplete multipart uploads"
    unknown = _unreadable(settings, "lifecycle", "s3:GetLifecycleConfiguration")
    if unknown is not None:
        return Finding(name, unknown.severity, unknown.detail)
    for rule in rules:
        abort = rule.get("AbortIncompleteMultipartUpload")
        if abort is not None:
            days = counted(int(abort.get("DaysAfterInitiation", 0)), "day")
            return Finding(name, Severity.OK, f"aborted after {days} under {prefix}")
    return Finding(
        name,
        Severity.WARNING,
        f"no lifecycle rule aborts incomplete multipart uploads under {prefix}: an upload "
        f"a producer never completed is not an object, so no collector deletes it, and "
        f"its parts stay billed; add the rule ({DOCS})",
    )


def _object_lock(settings: BucketSettings) -> Finding:
    name = "object lock"
    unknown = _unreadable(settings, name, "s3:GetBucketObjectLockConfiguration")
    if unknown is not None:
        return unknown
    lock = settings.object_lock or {}
    if lock.get("ObjectLockEnabled") != "Enabled":
        return Finding(name, Severity.OK, "not enabled")
    retention = lock.get("Rule", {}).get("DefaultRetention")
    default = ""
    if retention:
        days, years = retention.get("Days"), retention.get("Years")
        span = counted(int(days), "day") if days else counted(int(years or 0), "year")
        default = f" with a default retention ({retention.get('Mode')}, {span})"
    return Finding(
        name,
        Severity.ERROR,
        f"enabled{default}: a locked version cannot be deleted, so epochgc cannot "
        f"reclaim L0 objects in this bucket; use a bucket without object lock ({DOCS})",
    )


def read_bucket_settings(store: S3ObjectStore, root: str) -> BucketSettings:
    """Read versioning, lifecycle rules, object lock and one page of the L0
    prefix's versions. A setting the credentials may not read (or the store
    does not implement) is reported as unreadable, never as absent.

    Raises:
        PermanentStorageError: the bucket cannot be reached at all.
    """
    client, bucket = store.client, store.bucket
    unreadable: dict[str, str] = {}

    def read(name: str, operation: str, fn: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
        try:
            return dict(store.bucket_request(operation, fn))
        except NotFoundError:
            return {}  # 404: the bucket has no such configuration
        except StorageError as err:
            raw = err.__cause__
            code = _code(raw) if isinstance(raw, ClientError) else ""
            if isinstance(err, AccessDeniedError) or code == "NotImplemented":
                unreadable[name] = f"{operation}: {code or 'refused'}"
                return {}
            raise

    versioning = read(
        "versioning",
        "GetBucketVersioning",
        lambda: client.get_bucket_versioning(Bucket=bucket),
    )
    lifecycle = read(
        "lifecycle",
        "GetBucketLifecycleConfiguration",
        lambda: client.get_bucket_lifecycle_configuration(Bucket=bucket),
    )
    lock = read(
        "object lock",
        "GetObjectLockConfiguration",
        lambda: client.get_object_lock_configuration(Bucket=bucket),
    )
    state = None if "versioning" in unreadable else str(versioning.get("Status", ""))
    noncurrent = None
    if state in ("Enabled", "Suspended"):
        page = read(
            "noncurrent versions",
            "ListObjectVersions",
            lambda: client.list_object_versions(Bucket=bucket, Prefix=l0_prefix(root)),
        )
        if "noncurrent versions" not in unreadable:
            old = [v for v in page.get("Versions", []) if not v.get("IsLatest")]
            noncurrent = NoncurrentVersions(
                len(old),
                sum(v.get("Size", 0) for v in old),
                len(page.get("DeleteMarkers", [])),
                not page.get("IsTruncated", False),
            )
    rules = None if "lifecycle" in unreadable else list(lifecycle.get("Rules", []))
    return BucketSettings(
        state,
        rules,
        None if "object lock" in unreadable else dict(lock.get("ObjectLockConfiguration", {})),
        noncurrent,
        unreadable,
    )


def _code(raw: ClientError) -> str:
    return str(raw.response.get("Error", {}).get("Code", ""))


def format_findings(findings: Sequence[Finding]) -> str:
    """One line per setting, as ``check-store`` prints them under its probes."""
    marks = {Severity.OK: "ok  ", Severity.WARNING: "WARN", Severity.ERROR: "FAIL"}
    return "\n".join(f"{marks[f.severity]}  {f.name}: {f.detail}" for f in findings)


def ensure_bucket_fit_for_collector(store: S3ObjectStore, root: str) -> list[Finding]:
    """What a collector's start runs: log each warning (one line), refuse
    an error before any round.

    Raises:
        BucketSettingsError: a setting makes deleting impossible.
    """
    findings = assess_bucket_settings(read_bucket_settings(store, root), root)
    for finding in findings:
        if finding.severity is Severity.WARNING:
            log.warning("bucket %s: %s: %s", store.bucket, finding.name, finding.detail)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        raise BucketSettingsError(
            f"bucket {store.bucket!r}: " + "; ".join(f"{f.name} {f.detail}" for f in errors)
        )
    return findings
