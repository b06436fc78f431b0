"""The per-role policies of docs/policies/ are the ones docs/operating.md
shows (``make test-rgw`` applies the files on a Ceph RADOS Gateway, so the
docs and what was tested are one source): every JSON block marked with a
file equals it, every file is linked from the section, and the files are
well-formed policies with only the documented placeholders."""

from __future__ import annotations

import json
import re

import pytest

from epochgc.errors import LEAST_PRIVILEGE_SECTION
from tests.support.policies import POLICIES, ROLES, policy_text, role_policy

OPERATING = POLICIES.parent / "operating.md"
MARKED_BLOCK = re.compile(r"<!-- policy: ([\w.-]+) -->\n```json\n(.*?)\n```", re.DOTALL)


def section() -> str:
    text = OPERATING.read_text(encoding="utf-8")
    heading = "### " + LEAST_PRIVILEGE_SECTION.split('"')[1]
    start = text.index(heading + "\n")
    return text[start : text.index("\n### ", start + 1)]


def test_the_files_are_exactly_the_documented_roles() -> None:
    assert sorted(p.stem for p in POLICIES.glob("*.json")) == sorted(ROLES)
    for role in ROLES:
        assert f"](policies/{role}.json)" in section(), f"{role}.json is not linked"


def test_every_policy_block_shown_equals_its_file() -> None:
    blocks = MARKED_BLOCK.findall(section())
    assert blocks, "the section shows no policy"
    for name, block in blocks:
        assert json.loads(block) == json.loads((POLICIES / name).read_text()), name


OBJECT_ACTIONS = {"s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
BUCKET_SETTINGS_ACTIONS = {
    "s3:GetBucketVersioning",
    "s3:GetLifecycleConfiguration",
    "s3:GetBucketObjectLockConfiguration",
    "s3:ListBucketVersions",
}
"""What check-store and the daemon's start read of the bucket's settings
(docs/operating.md, "Bucket settings")."""


@pytest.mark.parametrize("role", ROLES)
def test_a_policy_is_well_formed_with_only_the_documented_placeholders(role: str) -> None:
    text = policy_text(role)
    arns = re.findall(r'"(arn:[^"]+)"', text)
    assert arns and all(re.fullmatch(r"arn:aws:s3:::BUCKET(/ROOT/.*)?", a) for a in arns), arns
    statements = role_policy(role, bucket="b", root="r", node_id="n")["Statement"]
    sids = [s["Sid"] for s in statements]
    assert len(sids) == len(set(sids)) and all(re.fullmatch(r"[A-Za-z0-9]+", s) for s in sids)
    for statement in statements:
        assert statement["Effect"] == "Allow" and "Principal" not in statement
        actions = statement["Action"]
        for action in [actions] if isinstance(actions, str) else actions:
            assert action in OBJECT_ACTIONS | BUCKET_SETTINGS_ACTIONS
            if action in BUCKET_SETTINGS_ACTIONS:  # read on the bucket, never on objects
                assert statement["Resource"] == "arn:aws:s3:::b"


def test_the_daemon_has_every_right_of_the_collector() -> None:
    daemon = role_policy("daemon", bucket="b", root="r")["Statement"]
    collector = role_policy("collector", bucket="b", root="r")["Statement"]

    def rights(statements: list[dict[str, object]]) -> set[tuple[str, str]]:
        out = set()
        for s in statements:
            actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
            resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
            out |= {(str(a), str(r)) for a in actions for r in resources}
        return out

    assert rights(collector) <= rights(daemon)
