"""Judging the bucket settings that defeat a collector: pure, from the
documents S3 returns."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from epochgc.storage.bucket_settings import (
    BucketSettings,
    NoncurrentVersions,
    Severity,
    assess_bucket_settings,
    rule_covers,
)

ROOT = "epochgc"
PREFIX = "epochgc/l0/"
EXPIRE_NONCURRENT = {"NoncurrentVersionExpiration": {"NoncurrentDays": 1}}
ABORT = {"AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}}


def rule(prefix: str | None = "", **parts: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"ID": "r", "Status": "Enabled", **parts}
    if prefix is not None:
        body["Filter"] = {"Prefix": prefix}
    return body


def severities(settings: BucketSettings) -> dict[str, Severity]:
    return {f.name: f.severity for f in assess_bucket_settings(settings, ROOT)}


prefixes = st.text(alphabet="epochgl0/x", max_size=14)


@given(prefixes)
def test_a_prefix_rule_covers_the_l0_prefix_exactly_when_it_is_a_prefix_of_it(p: str) -> None:
    assert rule_covers(rule(p), PREFIX) == PREFIX.startswith(p)
    assert rule_covers({"Status": "Enabled", "Prefix": p}, PREFIX) == PREFIX.startswith(p)
    assert rule_covers(rule(None, Filter={"And": {"Prefix": p}}), PREFIX) == PREFIX.startswith(p)


@given(prefixes)
def test_a_disabled_tagged_or_size_bound_rule_never_covers(p: str) -> None:
    assert not rule_covers({**rule(p), "Status": "Disabled"}, PREFIX)
    assert not rule_covers(rule(None, Filter={"Tag": {"Key": "k", "Value": "v"}}), PREFIX)
    tags = {"Prefix": p, "Tags": [{"Key": "k", "Value": "v"}]}
    assert not rule_covers(rule(None, Filter={"And": tags}), PREFIX)
    sized = {"Prefix": p, "ObjectSizeGreaterThan": 1}
    assert not rule_covers(rule(None, Filter={"And": sized}), PREFIX)
    assert not rule_covers(rule(None, Filter={"ObjectSizeLessThan": 10}), PREFIX)


def test_a_correct_bucket_has_no_finding() -> None:
    versioned = BucketSettings("Enabled", [rule("epochgc/", **EXPIRE_NONCURRENT, **ABORT)], {})
    assert set(severities(versioned).values()) == {Severity.OK}
    plain = BucketSettings("", [rule("", **ABORT)], {})
    assert set(severities(plain).values()) == {Severity.OK}


def test_versioning_without_a_noncurrent_rule_warns_and_names_the_bytes_that_stay() -> None:
    for state in ("Enabled", "Suspended"):
        settings = BucketSettings(
            state,
            [rule("epochgc/l1/", **EXPIRE_NONCURRENT), rule("", **ABORT)],  # l1 only: no cover
            {},
            NoncurrentVersions(3, 5 * 1024 * 1024, 3, complete=True),
        )
        (finding,) = [f for f in assess_bucket_settings(settings, ROOT) if f.name == "versioning"]
        assert finding.severity is Severity.WARNING
        assert state in finding.detail and "epochgc/l0/" in finding.detail
        assert "3 noncurrent versions, 5.0 MiB, and 3 delete markers" in finding.detail


def test_a_bucket_without_rules_warns_of_incomplete_multipart_uploads() -> None:
    found = severities(BucketSettings("", [], {}))
    assert found == {
        "versioning": Severity.OK,
        "incomplete multipart uploads": Severity.WARNING,
        "object lock": Severity.OK,
    }


def test_object_lock_is_an_error_with_or_without_a_default_retention() -> None:
    for lock in (
        {"ObjectLockEnabled": "Enabled"},
        {
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 30}},
        },
    ):
        settings = BucketSettings("Enabled", [rule("", **EXPIRE_NONCURRENT, **ABORT)], lock)
        (finding,) = [f for f in assess_bucket_settings(settings, ROOT) if f.name == "object lock"]
        assert finding.severity is Severity.ERROR and "cannot be deleted" in finding.detail
    retained = assess_bucket_settings(BucketSettings("", [], lock), ROOT)[-1]
    assert "GOVERNANCE, 30 days" in retained.detail


def test_a_setting_that_could_not_be_read_is_a_warning_naming_the_right_to_grant() -> None:
    settings = BucketSettings(
        None,
        None,
        None,
        unreadable={
            "versioning": "GetBucketVersioning: AccessDenied",
            "lifecycle": "GetBucketLifecycleConfiguration: AccessDenied",
            "object lock": "GetObjectLockConfiguration: AccessDenied",
        },
    )
    findings = assess_bucket_settings(settings, ROOT)
    assert [f.severity for f in findings] == [Severity.WARNING] * 3
    grants = " ".join(f.detail for f in findings)
    for action in (
        "s3:GetBucketVersioning",
        "s3:GetLifecycleConfiguration",
        "s3:GetBucketObjectLockConfiguration",
    ):
        assert action in grants
