"""Least privilege on a real Ceph RADOS Gateway: one RGW user per role, the
policies of docs/policies/ applied as the bucket's policy (the files the
docs show, placeholders filled in), and the README's walkthrough run with
every process under its own user: check-store and topic create (operator),
produce (producer, beside a leader under the reconciler's user), the
reconciler, gc collect and gc spark in listing mode (collector), the
daemon, and the read-only commands (read-only operator). Then each role
tries what it must not, the store refuses, and epochgc says so in one line
naming the operation, the key and the documented policy section; the same
attempt with that one policy statement widened succeeds, so the refusal
came from that statement."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from epochgc.config import Config, load_config
from epochgc.errors import LEAST_PRIVILEGE_SECTION, AccessDeniedError, NotFoundError
from epochgc.storage.client import make_s3_client
from epochgc.storage.s3 import S3ObjectStore
from epochgc.wiring.reconciler_process import produce_and_verify
from epochgc.wiring.settings import client_settings_of
from epochgc.wiring.store import open_store, store_from_settings
from tests.rgw.conftest import Gateway, RoleUser
from tests.support.cli import REPO, run_cli
from tests.support.policies import Statement, Widen, bucket_policy

CONFIG = "config/local-server.toml"
ROOT = "epochgc"
NODE_ID = "rec-1"
OWNER_UID = "epochgc"  # the user scripts/ceph_rgw.sh makes, owner of the test buckets


@dataclass(frozen=True)
class Roles:
    """A test bucket whose policy gives each role user its documented rights."""

    rgw: Gateway
    users: dict[str, RoleUser]

    def cli(self, role: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--config", CONFIG, env={**self.rgw.env_as(self.users[role]), **env})

    def ok(self, role: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        done = self.cli(role, *args, **env)
        line = " ".join(args)
        assert done.returncode == 0, f"{role}: `{line}` exited {done.returncode}:\n{done.stderr}"
        assert "Traceback" not in done.stderr, line
        complaints = [ln for ln in done.stderr.splitlines() if re.search(r" (WARNING|ERROR) ", ln)]
        assert not complaints, f"{role}: `{line}` complained:\n" + "\n".join(complaints)
        return done

    def config(self, role: str, **env: str) -> Config:
        return load_config(CONFIG, env={**self.rgw.env_as(self.users[role]), **env})

    def store(self, role: str) -> S3ObjectStore:
        """epochgc's store under ``role``'s keys (the bare If-Match form: RGW 16)."""
        config = self.config(role, EPOCHGC_STORE__IF_MATCH_FORM="bare")
        return store_from_settings(config, client_settings_of(config))[0]

    def apply(self, widen: tuple[str, str, Widen] | None = None) -> None:
        policy = bucket_policy(
            {role: user.uid for role, user in self.users.items()},
            owner=OWNER_UID,
            bucket=self.rgw.bucket,
            root=ROOT,
            node_id=NODE_ID,
            widen=widen,
        )
        owner = make_s3_client(self.rgw.settings)
        owner.put_bucket_policy(Bucket=self.rgw.bucket, Policy=json.dumps(policy))


@pytest.fixture
def roles(rgw: Gateway, role_users: dict[str, RoleUser]) -> Iterator[Roles]:
    yield Roles(rgw, role_users)


def produce(roles: Roles, topic: str, partition: int, count: int) -> list[int]:
    """What a producer embedded in a system does: L0 objects under the
    producer's keys, appended through a partition leader that runs under
    the reconciler's keys (a one-shot node, as ``epochgc produce`` builds).
    Returns the offsets, checked to read back."""
    records = [f"{topic}-{partition}-{i}".encode() for i in range(count)]
    node_config = roles.config("reconciler", EPOCHGC_RECONCILER__NODE_ID=NODE_ID)
    producer_config = roles.config("producer")
    producer_store = store_from_settings(producer_config, client_settings_of(producer_config))[0]
    with open_store(node_config) as handle:
        offsets, ok = asyncio.run(
            produce_and_verify(
                node_config,
                handle.store,
                topic,
                partition,
                records,
                node_id=NODE_ID,
                producer_store=producer_store,
            )
        )
    assert ok, "the records did not read back"
    return offsets


def l0_count(roles: Roles) -> int:
    owner = make_s3_client(roles.rgw.settings)
    listed = owner.list_objects_v2(Bucket=roles.rgw.bucket, Prefix=f"{ROOT}/l0/")
    return int(listed.get("KeyCount", 0))


def test_the_walkthrough_runs_with_each_process_under_its_own_user(roles: Roles) -> None:
    roles.apply()
    print(roles.ok("operator", "check-store").stdout)  # -rP shows it
    roles.ok("operator", "topic", "create", "orders", "--partitions", "2")
    assert len(produce(roles, "orders", 0, 100)) == 100
    assert l0_count(roles) > 0
    roles.ok("reconciler", "reconciler", "--duration", "15", EPOCHGC_RECONCILER__NODE_ID=NODE_ID)
    roles.ok("operator-readonly", "gc", "epoch-info")
    roles.ok("collector", "gc", "collect", "--dry-run")
    roles.ok("collector", "gc", "collect")
    assert l0_count(roles) == 0, "gc collect left L0 objects"

    produce(roles, "orders", 1, 50)
    assert l0_count(roles) > 0
    roles.ok("reconciler", "reconciler", "--duration", "15", EPOCHGC_RECONCILER__NODE_ID=NODE_ID)
    spark = roles.ok(
        "collector", "gc", "spark", "--mode", "listing", "--master", "local[2]", "--json"
    )
    summary = json.loads(spark.stdout)
    assert summary["deleted"] > 0, json.dumps(summary, indent=1) + spark.stderr
    assert l0_count(roles) == 0, "gc spark left L0 objects"

    produce(roles, "orders", 0, 20)
    # The daemon beside a live reconciler, as deployed: it ticks, collects
    # and tidies while the node keeps its report fresh.
    node = subprocess.Popen(
        [sys.executable, "-m", "epochgc.cli", "reconciler", "--duration", "25", "--config", CONFIG],
        cwd=REPO,
        env={
            **os.environ,
            **roles.rgw.env_as(roles.users["reconciler"]),
            "EPOCHGC_RECONCILER__NODE_ID": NODE_ID,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(8)  # it owns its partitions and reports
        roles.ok("daemon", "daemon", "--duration", "15", "--node-id", "gc-a")
    finally:
        _, node_stderr = node.communicate(timeout=60)
    assert node.returncode == 0, node_stderr
    assert not re.search(r" (WARNING|ERROR) ", node_stderr), node_stderr
    assert l0_count(roles) == 0, "the daemon left L0 objects"

    runs = roles.ok("operator-readonly", "gc", "runs").stdout
    assert "dry-run" in runs, runs
    roles.ok("operator-readonly", "gc", "status")
    roles.ok("operator-readonly", "node", "list")


# --- what each role must not do ------------------------------------------


@dataclass(frozen=True)
class Refusal:
    role: str
    operation: str  # epochgc's name of the S3 operation
    key: str
    statement: str  # the Sid that, widened, lets it through


L1_KEY = f"{ROOT}/l1/orders/1/0/00000000000000000000-00000000000000000009-{uuid.uuid4()}"
LOG_KEY = f"{ROOT}/meta/partitions/orders/1/0/log/00000000000000000003"
L0_KEY = f"{ROOT}/l0/003/000000000000000002/{uuid.uuid4()}"
REPORT_KEY = f"{ROOT}/meta/reports/{NODE_ID}"

REFUSALS = {
    "collector deletes an L1 object": Refusal("collector", "DeleteObject", L1_KEY, "DeleteL0"),
    "collector deletes a partition log entry": Refusal(
        "collector", "DeleteObject", LOG_KEY, "DeleteL0"
    ),
    "reconciler deletes an L0 object": Refusal(
        "reconciler", "DeleteObject", L0_KEY, "TruncateLogs"
    ),
    "producer writes a report": Refusal("producer", "PutObject", REPORT_KEY, "WriteL0"),
}


def widened(roles: Roles, case: Refusal) -> tuple[str, str, Widen]:
    def change(statement: Statement) -> Statement:
        return {**statement, "Resource": f"arn:aws:s3:::{roles.rgw.bucket}/{ROOT}/*"}

    return (case.role, case.statement, change)


def attempt(roles: Roles, case: Refusal) -> None:
    store = roles.store(case.role)
    if case.operation == "DeleteObject":
        store.delete(case.key)
    else:
        store.put(case.key, b"{}")


def seed(roles: Roles, case: Refusal) -> bytes:
    """The object the attempt is about, written by the bucket owner."""
    body = f"seeded {uuid.uuid4()}".encode()
    make_s3_client(roles.rgw.settings).put_object(Bucket=roles.rgw.bucket, Key=case.key, Body=body)
    return body


def stored(roles: Roles, key: str) -> bytes | None:
    owner = make_s3_client(roles.rgw.settings)
    try:
        return owner.get_object(Bucket=roles.rgw.bucket, Key=key)["Body"].read()
    except owner.exceptions.NoSuchKey:
        return None


@pytest.mark.parametrize("name", list(REFUSALS))
def test_the_store_refuses_and_epochgc_says_so_in_one_line(roles: Roles, name: str) -> None:
    case = REFUSALS[name]
    roles.apply()
    body = seed(roles, case)
    with pytest.raises(AccessDeniedError) as refused:
        attempt(roles, case)
    message = str(refused.value)
    assert "\n" not in message
    assert f"for {case.operation} key={case.key!r}" in message, message
    assert LEAST_PRIVILEGE_SECTION in message, message
    assert stored(roles, case.key) == body, "the refused request changed nothing"


@pytest.mark.parametrize("name", list(REFUSALS))
def test_widening_the_one_statement_lets_it_through(roles: Roles, name: str) -> None:
    case = REFUSALS[name]
    roles.apply(widened(roles, case))
    body = seed(roles, case)
    attempt(roles, case)
    after = stored(roles, case.key)
    assert after != body, f"{name}: the widened policy still refused it"


def test_a_collectors_batched_delete_of_an_l1_object_is_refused_per_key(roles: Roles) -> None:
    """What the collector sends is DeleteObjects: RGW checks each key
    against the policy and answers AccessDenied for the L1 one inside the
    200, deleting the L0 one beside it."""
    roles.apply()
    l1 = REFUSALS["collector deletes an L1 object"]
    body = seed(roles, l1)
    l0 = Refusal("collector", "DeleteObject", L0_KEY, "DeleteL0")
    seed(roles, l0)
    outcome = roles.store("collector").delete_batch([l1.key, l0.key])
    assert dict(outcome.failed) == {l1.key: "AccessDenied"}
    assert outcome.deleted == (l0.key,)
    assert stored(roles, l1.key) == body and stored(roles, l0.key) is None


def test_a_read_only_operator_cannot_pause(roles: Roles) -> None:
    roles.apply()
    roles.ok("operator", "topic", "create", "orders", "--partitions", "1")  # a root in use
    done = roles.cli("operator-readonly", "gc", "pause", "--reason", "audit")
    assert done.returncode == 1, done.stdout
    assert "Traceback" not in done.stderr
    told = [ln for ln in done.stderr.splitlines() if ln.strip() and " INFO " not in ln]
    assert len(told) == 1, done.stderr
    [line] = told
    assert line.startswith("epochgc: access denied ") and "for PutObject key='epochgc/" in line, (
        line
    )
    assert LEAST_PRIVILEGE_SECTION in line, line
    assert "paused" not in roles.ok("operator-readonly", "gc", "status").stdout.lower()


def test_a_read_only_operator_with_write_added_to_its_read_statement_can_pause(
    roles: Roles,
) -> None:
    def change(statement: Statement) -> Statement:
        bucket = f"arn:aws:s3:::{roles.rgw.bucket}"
        return {
            **statement,
            "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "Resource": [bucket, statement["Resource"]],
        }

    roles.apply(("operator-readonly", "Read", change))
    roles.ok("operator", "topic", "create", "orders", "--partitions", "1")
    roles.ok("operator-readonly", "gc", "pause", "--reason", "audit")
    status = roles.ok("operator-readonly", "gc", "status").stdout
    assert "audit" in status, status


# --- what the documented policies needed on RGW 16 ---------------------


def test_list_bucket_with_a_prefix_condition_turns_a_missing_key_into_403(roles: Roles) -> None:
    """Why ``List`` has no ``s3:prefix`` condition: a GET of a missing key
    is answered 404 only to a caller allowed to list the bucket, and a GET
    carries no prefix. epochgc reads missing keys all the time (a report
    not yet written, the next log slot), so with the condition every role
    would fail on AccessDenied where it expects "not found"."""
    missing = f"{ROOT}/meta/controller/{uuid.uuid4()}"
    roles.apply()
    with pytest.raises(NotFoundError):
        roles.store("collector").get(missing)

    def prefixed(statement: Statement) -> Statement:
        prefixes = [f"{ROOT}/l0/*", f"{ROOT}/meta/*", f"{ROOT}/gc/*"]
        return {**statement, "Condition": {"StringLike": {"s3:prefix": prefixes}}}

    roles.apply(("collector", "List", prefixed))
    with pytest.raises(AccessDeniedError):
        roles.store("collector").get(missing)


def test_delete_objects_needs_delete_object_on_the_bucket_itself(roles: Roles) -> None:
    """Why ``DeleteObjectsRequest`` is there: RGW 16 first checks a
    DeleteObjects request as a whole against ``s3:DeleteObject`` on the
    bucket's ARN, then each key against its own ARN (the per-key test
    above). Without the statement the collector deletes nothing."""
    case = Refusal("collector", "DeleteObject", L0_KEY, "DeleteObjectsRequest")
    roles.apply(("collector", "DeleteObjectsRequest", lambda _statement: None))
    body = seed(roles, case)
    with pytest.raises(AccessDeniedError) as refused:
        roles.store("collector").delete_batch([case.key])
    assert "for DeleteObjects" in str(refused.value)
    assert stored(roles, case.key) == body
    roles.apply()
    assert roles.store("collector").delete_batch([case.key]).deleted == (case.key,)
