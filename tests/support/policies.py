"""The per-role S3 policies of docs/policies/, read the way the RGW tests
apply them: placeholders filled in, and each statement turned into a
bucket-policy statement for one user (RGW has no IAM roles for S3 users;
a bucket policy naming the user is how a role's rights are given there)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from tests.support.cli import REPO

POLICIES = REPO / "docs" / "policies"
ROLES = ("operator", "operator-readonly", "producer", "reconciler", "collector", "daemon")

Statement = dict[str, Any]
Widen = Callable[[Statement], Statement | None]
"""Changes one statement; ``None`` drops it."""


def policy_text(role: str) -> str:
    return (POLICIES / f"{role}.json").read_text(encoding="utf-8")


def role_policy(role: str, *, bucket: str, root: str, node_id: str = "*") -> dict[str, Any]:
    """The documented policy of ``role`` with BUCKET, ROOT and NODE_ID filled in."""
    text = policy_text(role)
    text = text.replace("BUCKET", bucket).replace("ROOT", root).replace("NODE_ID", node_id)
    policy: dict[str, Any] = json.loads(text)
    return policy


def bucket_policy(
    users: Mapping[str, str],
    *,
    owner: str,
    bucket: str,
    root: str,
    node_id: str,
    widen: tuple[str, str, Widen] | None = None,
) -> dict[str, Any]:
    """One bucket policy giving each user in ``users`` (role -> RGW user id)
    its role's documented statements, and the bucket's ``owner`` every
    right on every object (on RGW an object belongs to the user who wrote
    it: without this, the owner could not even read what a role wrote);
    ``widen`` = (role, Sid, change) replaces that one statement by
    ``change(statement)`` (drops it on ``None``)."""
    statements: list[Statement] = [
        {
            "Sid": "BucketOwner",
            "Effect": "Allow",
            "Principal": {"AWS": [f"arn:aws:iam:::user/{owner}"]},
            "Action": "s3:*",
            "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
        }
    ]
    widened = False
    for role, user in users.items():
        documented = role_policy(role, bucket=bucket, root=root, node_id=node_id)
        for original in documented["Statement"]:
            statement = original
            if widen is not None and (role, original["Sid"]) == widen[:2]:
                changed = widen[2](dict(original))
                widened = True
                if changed is None:
                    continue
                statement = changed
            sid = role.replace("-", "") + statement["Sid"]
            principal = {"AWS": [f"arn:aws:iam:::user/{user}"]}
            statements.append({**statement, "Sid": sid, "Principal": principal})
    assert widen is None or widened, f"no statement {widen} to widen"
    return {"Version": "2012-10-17", "Statement": statements}
