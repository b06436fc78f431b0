"""Every document epochgc writes to the bucket fits its published JSON
Schema (``docs/schemas/``). The documents come from the real writers on the
embedded S3, read back as bytes from the bucket: what another system would
find there, not what an encoder was handed in a unit test."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from epochgc.gc.collect import CollectSettings, collect_once
from epochgc.gc.control import pause, request_reset
from epochgc.ingest.directory import LeaderDirectory
from epochgc.reconciler.node import NodeSettings, ReconcilerNode
from epochgc.storage.keys import (
    controller_log_prefix,
    controller_snapshot_key,
    gc_control_key,
    parse_log_entry_key,
    report_key,
)
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.layout import ensure_layout, layout_marker_key
from epochgc.watermarks.leases import LeaseManager
from tests.support.schemas import schema_errors

ROOT = "epochgc"


def stored(store: S3ObjectStore, key: str) -> Any:
    return json.loads(store.get(key).body)


def controller_entries(store: S3ObjectStore) -> list[Any]:
    prefix = controller_log_prefix(ROOT)
    return [
        stored(store, info.key)
        for info in store.list_objects(prefix)
        if parse_log_entry_key(info.key, prefix) is not None
    ]


def test_controller_entries_of_every_type_fit_the_schema(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    controller.create_topic("orders", 3, {"retention.local.target.bytes": 1024})
    controller.create_topic("plain", 1)
    controller.delete_topic("plain")
    entries = controller_entries(store)
    assert sorted(e["type"] for e in entries) == [
        "create_topic",
        "create_topic",
        "delete_topic",
        "epoch_tick",
    ]
    for entry in entries:
        assert schema_errors("controller-entry", entry) == [], entry


def test_a_compacted_controller_snapshot_fits_the_schema(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.create_topic("orders", 2, {"retention.local.target.ms": 60_000})
    controller.create_topic("gone", 1)
    controller.delete_topic("gone")
    controller.tick()
    assert controller.compact().snapshot_offset == 4
    snapshot = stored(store, controller_snapshot_key(ROOT))
    assert [t["topic"] for t in snapshot["topics"]] == ["orders"]
    assert [d["topic"] for d in snapshot["deleted_topics"]] == ["gone"]
    assert snapshot["epoch_starts"]
    assert schema_errors("controller-snapshot", snapshot) == []


def test_a_reconciler_nodes_report_fits_the_schema(store: S3ObjectStore) -> None:
    async def scenario() -> None:
        controller = Controller(store, ROOT)
        controller.create_topic("orders", 2)
        leases = LeaseManager(store, ROOT, "node-a")
        node = ReconcilerNode(
            store,
            ROOT,
            "node-a",
            leases,
            LeaderDirectory(),
            settings=NodeSettings(idle_interval_seconds=0.0, report_interval_seconds=0.0),
        )
        for _ in range(3):  # lead, then let housekeeping move M(p)
            controller.tick()
            await node.run_round()
            await node.run_round()
        await node.stop()

    asyncio.run(scenario())
    report = stored(store, report_key(ROOT, "node-a"))
    assert report["v"] == 2 and len(report["partitions"]) == 2
    assert max(p["safe_epoch"] for p in report["partitions"]) >= 1
    assert schema_errors("node-report", report) == []


def test_a_collect_rounds_summary_fits_the_schema(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    stats = RequestStats()
    stats.attach(store.client)
    outcome = collect_once(
        store,
        stats,
        ROOT,
        CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0),
    )
    summary = stored(store, outcome.summary_key)
    assert summary["v"] == 2 and summary["engine"] == "local"
    assert schema_errors("run-summary", summary) == []


def test_the_control_document_fits_the_schema(store: S3ObjectStore) -> None:
    now = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
    pause(store, ROOT, by="alice", reason="bucket migration", now=now)
    assert schema_errors("control", stored(store, gc_control_key(ROOT))) == []
    request_reset(store, ROOT, by="bob", now=now + timedelta(minutes=1))
    control = stored(store, gc_control_key(ROOT))
    assert control["reset_generation"] == 1
    assert schema_errors("control", control) == []


def test_the_layout_marker_fits_the_schema(store: S3ObjectStore) -> None:
    ensure_layout(store, ROOT)
    marker = stored(store, layout_marker_key(ROOT))
    assert marker == {"v": 1, "layout": 2}
    assert schema_errors("layout-marker", marker) == []


def test_the_schemas_reject_what_the_readers_reject() -> None:
    """A sanity check of the schemas themselves: each refuses a document
    with a field the readers refuse (the fuzz tests cover the rest)."""
    entry = {"v": 1, "type": "create_topic", "topic": "a/b", "partitions": 1, "ts": "x"}
    assert len(schema_errors("controller-entry", entry)) >= 1
    report = {"v": 3, "node": "n", "generated_at": "2026-11-22T03:00:00Z", "partitions": []}
    assert schema_errors("node-report", report)
    marker: dict[str, Any] = {"v": 1}
    assert schema_errors("layout-marker", marker)
