"""Test helpers for tests that drive a partition log directly: append one
``placeholders`` command through a partition leader, as the leader service
does for a producer's upload, without the service's fence and queue; and
partition 0 of a topic ``orders`` (``create_orders``), its replica and a
started leader of it."""

from __future__ import annotations

from collections.abc import Sequence

from epochgc.errors import StaleEpochError
from epochgc.storage.keys import PartitionId
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.commands import PlaceholderBatch, Placeholders
from epochgc.watermarks.partition.replica import AppliedEntry, PartitionReplica
from epochgc.watermarks.partition.state import Outcome
from epochgc.watermarks.partition.term_writer import TermWriter

ROOT = "epochgc"
ORDERS_0 = PartitionId("orders", 2, 0)
"""Partition 0 of ``orders`` as ``create_orders`` makes it on a fresh root."""


def append_placeholders(
    leader: TermWriter, epoch: int, batches: Sequence[PlaceholderBatch]
) -> AppliedEntry:
    """Append one ``placeholders`` of ``batches`` at ``epoch``.

    Raises:
        StaleEpochError: the apply-time check rejected the epoch.
    """
    entry = leader.append_all([Placeholders(0, 0, epoch, tuple(batches))])[0]
    if entry.result.outcome is Outcome.REJECTED_STALE_EPOCH:
        window = leader.replica.applied_window()
        raise StaleEpochError(epoch, window.previous, window.max)
    return entry


def batch(i: int, records: int = 1) -> tuple[PlaceholderBatch, ...]:
    """One batch of ``records`` records, in the (made-up) L0 object ``l0/{i}``."""
    return (PlaceholderBatch(f"l0/{i}", 0, 10, records),)


def create_orders(store: ObjectStore) -> int:
    """One tick, then topic ``orders`` with one partition: its revision, 2
    (``ORDERS_0``)."""
    controller = Controller(store, ROOT)
    controller.tick()
    return controller.create_topic("orders", 1).revision


def open_replica(store: ObjectStore) -> PartitionReplica:
    """A replica of ``ORDERS_0``, opened (replayed from the store)."""
    replica = PartitionReplica(store, ROOT, ORDERS_0)
    replica.open()
    return replica


def leader(store: ObjectStore, term: int) -> TermWriter:
    """A started leader of ``ORDERS_0`` in ``term`` (its ``term_start`` appended)."""
    lead = TermWriter(open_replica(store), term)
    lead.start()
    return lead
