"""The foreign-system example (``examples/foreign_writer.py``, plain boto3)
writes a topic, L0 objects and a v2 node report; ``epochgc gc collect``,
run as an operator would, then deletes exactly the L0 objects at or below
the ``M`` that report gives, and nothing else under or beside the root."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from epochgc.storage.embedded import EMBEDDED_ACCESS_KEY, EMBEDDED_SECRET_KEY, EmbeddedS3
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.support.cli import REPO, run_cli
from tests.support.config_files import write_gc_config
from tests.support.schemas import schema_errors

EXAMPLE = REPO / "examples" / "foreign_writer.py"
ROOT = "epochgc"


def run_example(endpoint: str, bucket: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": EMBEDDED_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": EMBEDDED_SECRET_KEY,
    }
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--endpoint", endpoint, "--bucket", bucket, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def all_keys(store: S3ObjectStore) -> set[str]:
    return {info.key for info in store.list_objects("")}


def test_the_example_imports_nothing_from_epochgc() -> None:
    tree = ast.parse(EXAMPLE.read_text())
    nodes = list(ast.walk(tree))
    imported = {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in nodes if isinstance(n, ast.ImportFrom)}
    assert not any(name.split(".")[0] == "epochgc" for name in imported), imported
    assert "boto3" in imported


def test_collect_deletes_exactly_what_the_foreign_report_allows(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    # Objects the collector must never touch, whatever M is: not L0-shaped,
    # a sibling root, outside the root, and the controller log itself.
    old = f"{uuid.uuid4()}"
    decoys = [
        f"{ROOT}/l0/000/not-an-epoch/{old}",
        f"{ROOT}/l0/000/{0:018d}/not-a-uuid",
        f"{ROOT}/l0/7/{0:018d}/{old}",
        f"{ROOT}2/l0/000/{0:018d}/{old}",
        f"elsewhere/l0/000/{0:018d}/{old}",
    ]
    for key in decoys:
        store.put(key, b"not ours")

    done = run_example(s3_server.endpoint_url, bucket, "--epochs", "4", "--reconciled", "2")
    assert done.returncode == 0, done.stderr
    told = json.loads(done.stdout)
    assert (told["revision"], told["safe_epoch"], told["cluster_epoch"]) == (1, 2, 4)
    assert len(told["expect_deleted"]) == 6 and len(told["expect_kept"]) == 6

    # What it wrote is what epochgc reads: the schemas and epochgc's own view.
    report = json.loads(store.get(told["report"]).body)
    assert schema_errors("node-report", report) == []
    assert Controller(store, ROOT).topic("foreign-orders").revision == 1
    before = all_keys(store)

    config = write_gc_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket, shards=16)
    collected = run_cli("gc", "collect", "--config", str(config), "--json")
    assert collected.returncode == 0, collected.stderr
    summary = json.loads(collected.stdout)
    assert summary["safe_epoch"] == 2, summary
    assert summary["deleted"] == 6, summary

    after = all_keys(store)
    assert before - after == set(told["expect_deleted"])
    assert set(told["expect_kept"]) <= after
    assert set(decoys) <= after


def test_a_second_writer_cannot_create_the_same_topic(
    s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    first = run_example(s3_server.endpoint_url, bucket, "--epochs", "1", "--reconciled", "0")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["safe_epoch"] == 0  # revision 1 - 1: nothing may go
    second = run_example(s3_server.endpoint_url, bucket, "--epochs", "1", "--reconciled", "0")
    assert second.returncode != 0
    assert "already exists" in second.stderr


def test_two_topics_with_the_default_node_id_keep_both_reports(
    s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    """Run twice for two topics without --node-id: each run's report must
    stay (the first used to be overwritten, dropping M to 0)."""
    for topic in ("foreign-a", "foreign-b"):
        done = run_example(s3_server.endpoint_url, bucket, "--topic", topic, "--epochs", "2")
        assert done.returncode == 0, done.stderr
    reports = {i.key for i in store.list_objects(f"{ROOT}/meta/reports/")}
    assert len(reports) == 2, reports
    assert {json.loads(store.get(k).body)["partitions"][0]["topic"] for k in reports} == {
        "foreign-a",
        "foreign-b",
    }


def test_a_writer_with_its_own_object_names_is_named_not_only_counted(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    # A foreign writer using its own names under {root}/l0/ leaks objects
    # epochgc will never delete. The run names a few of them (summary,
    # `gc runs`, one WARNING), not only a count, and says which shards it
    # listed and why.
    done = run_example(s3_server.endpoint_url, bucket, "--epochs", "4", "--reconciled", "2")
    assert done.returncode == 0, done.stderr
    own_names = [f"{ROOT}/l0/000/batch-{i:02d}.parquet" for i in range(5)]
    own_names += [f"{ROOT}/l0/001/{0:018d}/part-{i}" for i in range(3)]
    for key in own_names:
        store.put(key, b"not an epochgc object")

    config = write_gc_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket, shards=16)
    collected = run_cli("gc", "collect", "--config", str(config))
    assert collected.returncode == 0, collected.stderr
    out = collected.stdout
    unparseable_line = next(line for line in out.splitlines() if line.startswith("unparseable"))
    named = [key for key in own_names if key in unparseable_line]
    assert len(named) >= 3, unparseable_line
    assert "never deleted" in unparseable_line, unparseable_line
    warnings = [line for line in collected.stderr.splitlines() if "WARNING" in line]
    assert len([w for w in warnings if "do not parse as L0 keys" in w]) == 1, collected.stderr
    shards_line = next(line for line in out.splitlines() if line.startswith("shards:"))
    assert "listed" in shards_line and "every shard" in shards_line, shards_line

    as_json = json.loads(run_cli("gc", "runs", "--config", str(config), "--json").stdout)
    latest = as_json[-1] if isinstance(as_json, list) else as_json["runs"][-1]
    assert set(latest["unparseable_keys"]) <= set(own_names) and latest["unparseable_keys"]
    table = run_cli("gc", "runs", "--config", str(config)).stdout
    assert any(key in table for key in own_names), table
    assert set(own_names) <= all_keys(store)
