"""The janitor removes a deleted incarnation's partition logs, snapshots,
leases and L1 objects, and nothing of a live one (even one whose lease
names look alike), in bounded passes counted in the run summary."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.janitor import Janitor
from epochgc.gc.run_report import decode_summary
from epochgc.storage.keys import PartitionId, lease_key, legacy_partition_lease_key, owner_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.integration.test_layout_upgrade import _write_some

ROOT = "epochgc"


def keys_under(store: S3ObjectStore, prefix: str) -> list[str]:
    return [o.key for o in store.list_objects(prefix)]


def test_a_deleted_incarnation_is_removed_and_live_ones_stay(store: S3ObjectStore) -> None:
    asyncio.run(_write_some(store))  # orders@2: log, snapshot, an L1 object, a lease
    controller = Controller(store, ROOT)
    old = controller.topic("orders")
    assert keys_under(store, f"{ROOT}/l1/orders/{old.revision}/")
    controller.delete_topic("orders")
    new = controller.create_topic("orders", 1)
    # A live topic whose lease names start like the dead incarnation's.
    lookalike = controller.create_topic(f"orders.{old.revision}", 1)
    store.put(lease_key(ROOT, f"partition.orders.{old.revision}.0"), b"{}")
    store.put(lease_key(ROOT, f"partition.orders.{old.revision}.{lookalike.revision}.0"), b"{}")
    before_new = keys_under(store, f"{ROOT}/meta/partitions/orders/{new.revision}/")
    assert before_new, "the new incarnation's initial snapshot"

    result = Janitor(store, ROOT, max_deletes=2).run_once(controller.snapshot())
    assert (result.objects_deleted, result.complete) == (2, False), "bounded"
    outcome = collect_once(
        store,
        RequestStats(),
        ROOT,
        CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0),
        janitor=Janitor(store, ROOT),
    )
    assert outcome.summary.janitor.incarnations == 1 and outcome.summary.janitor.complete
    assert outcome.summary.janitor.objects_deleted > 0
    doc = json.loads(store.get(outcome.summary_key).body)
    assert doc["v"] == 2 and doc["janitor"]["objects_deleted"] > 0
    assert decode_summary(store.get(outcome.summary_key).body).janitor == outcome.summary.janitor

    assert keys_under(store, f"{ROOT}/meta/partitions/orders/{old.revision}/") == []
    assert keys_under(store, f"{ROOT}/l1/orders/{old.revision}/") == []
    assert keys_under(store, lease_key(ROOT, f"partition.orders.{old.revision}.0")) == []
    assert keys_under(store, f"{ROOT}/meta/partitions/orders/{new.revision}/") == before_new
    lookalike_lease = lease_key(ROOT, f"partition.orders.{old.revision}.{lookalike.revision}.0")
    assert keys_under(store, lookalike_lease) == [lookalike_lease]
    assert keys_under(store, f"{ROOT}/meta/partitions/orders.{old.revision}/")
    again = Janitor(store, ROOT).run_once(controller.snapshot())
    assert again.objects_deleted == 0


def test_ownership_records_of_a_deleted_incarnation_and_superseded_old_leases_go(
    store: S3ObjectStore,
) -> None:
    controller = Controller(store, ROOT)
    old = controller.create_topic("orders", 2)
    controller.delete_topic("orders")
    new = controller.create_topic("orders", 2)
    record = b'{"v":1,"node":"n","incarnation":"i","term":1,"updated_at":"2026-11-24T05:00:00Z"}'
    for revision in (old.revision, new.revision):
        store.put(owner_key(ROOT, PartitionId("orders", revision, 0)), record)
    # Old per-partition leases of the live incarnation: partition 0 has a
    # record (superseded), partition 1 has none yet (kept: its first record
    # must start above it).
    superseded = legacy_partition_lease_key(ROOT, PartitionId("orders", new.revision, 0))
    pending = legacy_partition_lease_key(ROOT, PartitionId("orders", new.revision, 1))
    for key in (superseded, pending):
        store.put(key, b"{}")

    result = Janitor(store, ROOT).run_once(controller.snapshot())
    assert result.complete and result.incarnations == 1
    assert keys_under(store, f"{ROOT}/meta/owners/orders/{old.revision}/") == []
    assert keys_under(store, f"{ROOT}/meta/owners/orders/{new.revision}/") == [
        owner_key(ROOT, PartitionId("orders", new.revision, 0))
    ]
    assert keys_under(store, f"{ROOT}/meta/leases/") == [pending]
