"""Every document epochgc writes to the bucket fits its published JSON
Schema (``docs/schemas/``). The documents come from the real writers on the
embedded S3, read back as bytes from the bucket: what another system would
find there, not what an encoder was handed in a unit test."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.control import pause, request_reset
from epochgc.gc.daemon.scheduler import GcDaemon
from epochgc.gc.listing.schedule import ListingPolicy
from epochgc.leases.node_lease import NodeLease
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.reconciler.fetch import pending_placeholders
from epochgc.reconciler.node_settings import NodeSettings
from epochgc.storage.keys import (
    PartitionId,
    controller_log_prefix,
    controller_snapshot_key,
    encode_l0_key,
    gc_control_key,
    gc_daemon_key,
    gc_shard_state_key,
    gc_status_key,
    node_lease_key,
    owner_key,
    parse_log_entry_key,
    report_key,
)
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.layout import ensure_layout, layout_marker_key
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.partition.replica import PartitionReplica
from tests.integration.test_daemon import settings as daemon_settings
from tests.support.nodes import eager_settings, node_and_producer, reconciler_node
from tests.support.schemas import schema_errors
from tests.support.waiting import wait_for

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
    deletion = next(e for e in entries if e["type"] == "delete_topic")
    assert (deletion["v"], deletion["revision"]) == (2, 3)


def test_the_controller_entry_schema_ties_a_named_revision_to_version_2() -> None:
    """A v1 reader ignores ``revision`` and ends whatever is live, so a
    delete naming one must be v2; one written before versions 2 stays valid."""
    ts = "2026-11-22T04:00:00Z"
    legacy = {"v": 1, "type": "delete_topic", "topic": "orders", "ts": ts}
    named = {**legacy, "v": 2, "revision": 3, "nonce": "ab"}
    assert schema_errors("controller-entry", legacy) == []
    assert schema_errors("controller-entry", named) == []
    assert schema_errors("controller-entry", {**named, "v": 1}) != []
    assert schema_errors("controller-entry", {**legacy, "v": 2}) != []
    tick = {"v": 2, "type": "epoch_tick", "ts": ts}
    assert schema_errors("controller-entry", tick) != []


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
        node, _leases = reconciler_node(
            store,
            ROOT,
            "node-a",
            LeaderDirectory(),
            settings=eager_settings(),
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


def test_a_stuck_partitions_report_entry_fits_the_schema(store: S3ObjectStore) -> None:
    """A real node stuck on a missing L0 object publishes the optional
    ``stuck`` object, and it fits the published shape."""

    async def scenario() -> None:
        controller = Controller(store, ROOT)
        controller.tick()
        topic = controller.create_topic("orders", 1)
        settings = NodeSettings(report_interval_seconds=0.0, stuck_retry_seconds=0.0)
        async with node_and_producer(store, ROOT, controller, settings=settings, shards=2) as n:
            await n.node.run_round()
            assert await n.producer.produce("orders", 0, [b"a", b"b"]) == [0, 1]
            await n.producer.close()
            replica = PartitionReplica(store, ROOT, topic.partition_id(0))
            replica.open()
            store.delete(pending_placeholders(replica, -1)[0].batches[0].l0_key)
            await n.node.run_round()
            await n.node.run_round()

    asyncio.run(scenario())
    report = stored(store, report_key(ROOT, "node-a"))
    (entry,) = report["partitions"]
    assert entry["stuck"]["cause"] == "missing", entry
    assert (entry["stuck"]["first_offset"], entry["stuck"]["last_offset"]) == (0, 1)
    assert schema_errors("node-report", report) == []


def test_a_daemons_presence_and_status_documents_fit_their_schemas(
    store: S3ObjectStore,
) -> None:
    """A real daemon, leader after its first round, writes both."""
    daemon = GcDaemon(store, RequestStats(), ROOT, daemon_settings("gc-a"))
    daemon.start()
    try:
        wait_for(lambda: daemon.rounds > 0, what="a first round")
        wait_for(lambda: any(store.list_objects(gc_status_key(ROOT))), what="a status")
        presence = stored(store, gc_daemon_key(ROOT, "gc-a"))
        status = stored(store, gc_status_key(ROOT))
    finally:
        daemon.stop()
    assert (presence["node"], presence["v"]) == ("gc-a", 1)
    assert schema_errors("presence", presence) == []
    assert status["holder"] == daemon.leases.holder and "last_round_at" in status
    assert schema_errors("status", status) == []


def test_a_collect_rounds_summary_fits_the_schema(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    store.put(encode_l0_key(ROOT, 7, 5, "00000000-0000-4000-8000-000000000000"), b"x")
    stats = RequestStats()
    stats.attach(store.client)
    outcome = collect_once(
        store,
        stats,
        ROOT,
        CollectSettings(
            min_object_age=timedelta(0), max_delete_fraction=1.0, listing=ListingPolicy()
        ),
    )
    summary = stored(store, outcome.summary_key)
    assert summary["v"] == 2 and summary["engine"] == "local"
    assert summary["cost"]["requests_usd"] > 0 and summary["shards"]["full_sweep"] is True
    assert schema_errors("run-summary", summary) == []
    knowledge = stored(store, gc_shard_state_key(ROOT))
    assert knowledge["v"] == 1 and schema_errors("shard-knowledge", knowledge) == []
    assert knowledge["shards"]["007"]["lowest_epoch"] == 5


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
    stuck = {"cause": "missing", "key": "k", "first_offset": -1, "last_offset": 0, "since": "x"}
    entry = {
        "topic": "t",
        "revision": 1,
        "partition": 0,
        "term": 0,
        "safe_epoch": 0,
        "lro": -1,
        "max_applied_epoch": 0,
        "previous_applied_epoch": 0,
        "stuck": stuck,
    }
    report = {"v": 2, "node": "n", "generated_at": "2026-11-22T03:00:00Z", "partitions": [entry]}
    assert len(schema_errors("node-report", report)) == 2
    status = {"v": 1, "state": "sleeping", "holder": "h", "updated_at": "2026-11-22T03:00:00Z"}
    assert schema_errors("status", status)
    presence = {"v": 1, "node": "n", "holder": "h", "role": "leader", "state": "running"}
    assert schema_errors("presence", {**presence, "refresh_seconds": 0})


def test_node_leases_and_ownership_records_fit_their_schemas(store: S3ObjectStore) -> None:
    """What a real node writes: its lease held and released, its records
    taken and released (and the schemas refuse what the readers refuse)."""
    pid = PartitionId("orders", 1, 0)
    lease = NodeLease(store, ROOT, "node-a")
    assert lease.try_acquire()
    ownership = NodeOwnership(store, ROOT, lease, max_moves_per_round=10)
    ownership.run_round([pid])
    held_lease = stored(store, node_lease_key(ROOT, "node-a"))
    held_record = stored(store, owner_key(ROOT, pid))
    assert held_record["term"] == 1 and "released" not in held_record
    ownership.stop()
    released_lease = stored(store, node_lease_key(ROOT, "node-a"))
    released_record = stored(store, owner_key(ROOT, pid))
    assert released_lease["released"] is True and released_record["released"] is True
    for doc in (held_lease, released_lease):
        assert schema_errors("node-lease", doc) == []
    for doc in (held_record, released_record):
        assert schema_errors("ownership-record", doc) == []
    assert schema_errors("node-lease", {**held_lease, "node": "a/b"})
    assert schema_errors("ownership-record", {**held_record, "term": 0})
    assert schema_errors("ownership-record", {**held_record, "v": 2})
