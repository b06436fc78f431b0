"""A bucket written by layout 1 (before topic incarnations) is refused by
every command until ``epochgc migrate`` rewrites it; then its data reads
back and GC runs. A fresh bucket gets the layout marker."""

from __future__ import annotations

import asyncio
from pathlib import Path

from epochgc.reconciler.node_settings import NodeSettings
from epochgc.reconciler.reader import PartitionReader
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.layout import layout_marker_key
from tests.support.cli import fatal_lines, run_cli
from tests.support.config_files import write_gc_config, write_server_config
from tests.support.nodes import QUICK_POLICY, node_and_producer

ROOT = "epochgc"


async def _write_some(store: S3ObjectStore) -> None:
    """Two records reconciled into L1, three left in L0 only."""
    controller = Controller(store, ROOT)
    controller.tick()
    controller.create_topic("orders", 1)
    settings = NodeSettings(report_interval_seconds=0)
    async with node_and_producer(
        store, ROOT, controller, settings=settings, policy=QUICK_POLICY
    ) as n:
        await n.node.run_round()
        await n.producer.produce("orders", 0, [b"a", b"b"])
        await n.node.run_round()
        await n.producer.produce("orders", 0, [b"c", b"d", b"e"])
        await n.producer.close()


def _to_layout_1(store: S3ObjectStore) -> int:
    """Rewrite every partition and L1 key without its revision segment, as
    the older epochgc wrote them; return how many keys moved."""
    moved = 0
    for prefix in (f"{ROOT}/meta/partitions/", f"{ROOT}/l1/"):
        for info in list(store.list_objects(prefix)):
            topic, _revision, rest = info.key[len(prefix) :].split("/", 2)
            stored = store.get(info.key)
            store.put(f"{prefix}{topic}/{rest}", stored.body, metadata=stored.metadata)
            store.delete(info.key)
            moved += 1
    return moved


def test_an_old_bucket_is_refused_then_migrated(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    asyncio.run(_write_some(store))
    assert _to_layout_1(store) > 0
    config = write_gc_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)
    l0_before = sorted(o.key for o in store.list_objects(f"{ROOT}/l0/"))

    for command in (["gc", "collect"], ["topic", "list"], ["partition", "show", "orders", "0"]):
        refused = run_cli(*command, "--config", str(config))
        assert refused.returncode == 1, refused
        assert "epochgc migrate" in refused.stderr and "Traceback" not in refused.stderr
        errors = fatal_lines(refused)
        assert refused.stderr.splitlines() == errors and len(errors) == 1, refused.stderr
    assert sorted(o.key for o in store.list_objects(f"{ROOT}/l0/")) == l0_before

    migrated = run_cli("migrate", "--config", str(config))
    assert migrated.returncode == 0, migrated.stderr
    assert "migrated 1 partition to layout 2" in migrated.stdout
    rows = PartitionReader(store, ROOT).read("orders", 0)
    assert rows == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    assert run_cli("migrate", "--config", str(config)).stdout.startswith(
        f"root {ROOT!r} is already in layout 2"
    )
    collect = run_cli("gc", "collect", "--config", str(config))
    assert collect.returncode == 0, collect.stderr
    # Nothing unreconciled was lost to the collector.
    assert [r for _, r in PartitionReader(store, ROOT).read("orders", 0)] == [
        b"a",
        b"b",
        b"c",
        b"d",
        b"e",
    ]


def test_a_fresh_bucket_gets_the_layout_marker(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    config = write_server_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)
    assert (
        run_cli(
            "topic", "create", "orders", "--partitions", "2", "--config", str(config)
        ).returncode
        == 0
    )
    assert store.get(layout_marker_key(ROOT)).body == b'{"layout":2,"v":1}'
    assert run_cli("topic", "list", "--config", str(config)).returncode == 0
