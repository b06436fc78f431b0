"""Every store-backed incarnation guard, held by a named scenario and a
property on the embedded S3 (issue 26, item 6; the pure guards are in
tests/unit/watermarks/test_incarnation_guards.py).

A topic deleted and created again under the same name is a new incarnation.
The replica never adopts another incarnation's snapshot or replays its log,
an ownership record of one incarnation never stands for another, the
janitor removing a dead incarnation never touches a live one's keys, and a
node leading the old incarnation steps down and leads the new one. Each
test was run with its guard removed and failed.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochgc.errors import CorruptLogError
from epochgc.gc.janitor import Janitor
from epochgc.ownership.owner_records import OwnershipStore, read_owner
from epochgc.storage.cas_log import COVERED_OFFSET_METADATA
from epochgc.storage.keys import (
    PartitionId,
    legacy_partition_lease_key,
    owner_key,
    partition_snapshot_key,
)
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller, ControllerView, TopicInfo
from epochgc.watermarks.partition.codec import PartitionSnapshot, encode_command, encode_snapshot
from epochgc.watermarks.partition.commands import TermStart
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.partition.replica import PartitionReplica, open_partition_log
from epochgc.watermarks.partition.state import PartitionState
from epochgc.watermarks.safe_epoch.reports import read_reports
from tests.support.nodes import QUICK_POLICY, eager_settings, publish_report_now, reconciler_node

ROOT = "epochgc"
NOW = datetime(2026, 11, 22, tzinfo=UTC)
FEW = settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
_names = (f"t{i}" for i in itertools.count())
"""A fresh topic name per hypothesis example: examples share the bucket."""


def _put_snapshot(store: S3ObjectStore, at: PartitionId, state: PartitionState) -> None:
    """Store a snapshot holding ``state`` where ``at``'s replica reads it
    (as a copy by hand or a bug keyed by name alone would)."""
    store.put(
        partition_snapshot_key(ROOT, at),
        encode_snapshot(PartitionSnapshot(state)),
        metadata={COVERED_OFFSET_METADATA: str(state.applied_log_offset)},
    )


def _old_state(revision: int) -> PartitionState:
    """An old incarnation's state, far along: a high ``M(p)``."""
    state = PartitionState.new(revision)
    return PartitionState(
        **{
            **state.__dict__,
            "max_applied_epoch": revision + 60,
            "previous_applied_epoch": revision + 50,
            "min_epoch_lower_bound": revision + 50,
        }
    )


# --- the replica refuses another revision's snapshot (watermarks/partition/replica.py) -------


def test_a_replica_of_orders_at_3_refuses_the_snapshot_of_orders_at_1(
    store: S3ObjectStore,
) -> None:
    new = PartitionId("orders", 3, 0)
    _put_snapshot(store, new, _old_state(1))
    with pytest.raises(CorruptLogError, match="holds revision 1, not 3"):
        PartitionReplica(store, ROOT, new).open()


@FEW
@given(st.integers(1, 40), st.integers(1, 40))
def test_a_replica_adopts_a_snapshot_only_of_its_own_revision(
    store: S3ObjectStore, held: int, revision: int
) -> None:
    pid = PartitionId(next(_names), revision, 0)
    _put_snapshot(store, pid, _old_state(held))
    replica = PartitionReplica(store, ROOT, pid)
    if held == revision:
        assert replica.open().safe_epoch == held + 49
    else:
        with pytest.raises(CorruptLogError):
            replica.open()


# --- the replica never replays another revision's log (storage/keys.py) ------------


def test_a_replica_of_orders_at_3_replays_nothing_of_the_log_of_orders_at_1(
    store: S3ObjectStore,
) -> None:
    old_log = open_partition_log(store, ROOT, PartitionId("orders", 1, 0))
    for offset in range(3):
        assert old_log.append_at(offset, encode_command(TermStart(7)))
    state = PartitionReplica(store, ROOT, PartitionId("orders", 3, 0)).open()
    assert (state.revision, state.term, state.applied_log_offset) == (3, 0, -1)


@FEW
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 3))
def test_a_replica_replays_only_its_own_revisions_log(
    store: S3ObjectStore, written: int, revision: int, entries: int
) -> None:
    topic = next(_names)
    log = open_partition_log(store, ROOT, PartitionId(topic, written, 0))
    for offset in range(entries):
        assert log.append_at(offset, encode_command(TermStart(offset + 1)))
    state = PartitionReplica(store, ROOT, PartitionId(topic, revision, 0)).open()
    if written == revision:
        assert (state.term, state.applied_log_offset) == (entries, entries - 1)
    else:
        assert (state.term, state.applied_log_offset) == (0, -1)


# --- ownership records are keyed by incarnation (storage/keys.py owner_key) --------


def test_a_live_owner_of_orders_at_1_does_not_stop_a_take_of_orders_at_3(
    store: S3ObjectStore,
) -> None:
    owners = OwnershipStore(store, ROOT, now=lambda: NOW)
    old, new = PartitionId("orders", 1, 0), PartitionId("orders", 3, 0)
    held = owners.take(old, None, "node-a", "inc-a")
    assert held is not None
    for _ in range(4):  # a long-led old incarnation: a high term
        raised = owners.raise_term(old, held, held.term + 1)
        assert raised is not None
        held = raised
    taken = owners.take(new, None, "node-b", "inc-b")
    assert taken is not None and taken.term == 1, "orders@3 starts fresh at term 1"
    record = read_owner(store, ROOT, old)
    assert record is not None and (record.node, record.term) == ("node-a", 5)


@FEW
@given(st.integers(1, 40), st.integers(1, 40), st.integers(0, 3))
def test_an_ownership_record_stands_only_for_its_own_incarnation(
    store: S3ObjectStore, first: int, second: int, raises: int
) -> None:
    topic = next(_names)
    owners = OwnershipStore(store, ROOT, now=lambda: NOW)
    a, b = PartitionId(topic, first, 0), PartitionId(topic, second, 0)
    held = owners.take(a, None, "node-a", "inc-a")
    assert held is not None
    for _ in range(raises):
        raised = owners.raise_term(a, held, held.term + 1)
        assert raised is not None
        held = raised
    taken = owners.take(b, None, "node-b", "inc-b")
    if a == b:
        assert taken is None, "a held record is never taken as if there were none"
    else:
        assert taken is not None and taken.term == 1
        record = read_owner(store, ROOT, a)
        assert record is not None and (record.node, record.term) == ("node-a", 1 + raises)


# --- the janitor's keys of a dead incarnation (gc/janitor.py, _keys_of) ------------


def _old_keys(store: S3ObjectStore, root: str, topic: str, revision: int) -> list[str]:
    """An old partition lease (partition 0, no ownership record, so not
    superseded) and an ownership record (partition 1) of one incarnation."""
    keys = [
        legacy_partition_lease_key(root, PartitionId(topic, revision, 0)),
        owner_key(root, PartitionId(topic, revision, 1)),
    ]
    for key in keys:
        store.put(key, b"{}")
    return keys


def test_the_janitor_removing_a_at_1_keeps_every_key_of_live_a_dot_1_at_5(
    store: S3ObjectStore,
) -> None:
    """Lease names are dotted: ``partition.a.1.`` is a prefix of topic
    ``a.1``'s old leases too."""
    _old_keys(store, ROOT, "a", 1)
    kept = _old_keys(store, ROOT, "a.1", 5)
    view = ControllerView(6, {"a.1": TopicInfo("a.1", 2, 5)})
    Janitor(store, ROOT).run_once(view)
    assert {info.key for info in store.list_objects(f"{ROOT}/meta/")} == set(kept)


DOTTED = st.sampled_from(["a", "a.1", "a.2", "a.1.1"])
"""Names whose old lease keys are prefixes of one another's."""


@settings(FEW, max_examples=15)
@given(
    st.sets(st.tuples(DOTTED, st.integers(1, 2)), max_size=5),
    st.dictionaries(DOTTED, st.integers(1, 2), max_size=3),
)
def test_the_janitor_deletes_every_key_of_dead_incarnations_and_none_of_live_ones(
    store: S3ObjectStore, present: set[tuple[str, int]], live: dict[str, int]
) -> None:
    root = f"r{next(_names)}"  # examples share the bucket
    keys = {i: _old_keys(store, root, *i) for i in present | set(live.items())}
    view = ControllerView(3, {n: TopicInfo(n, 2, r) for n, r in live.items()})
    Janitor(store, root).run_once(view)
    left = {info.key for info in store.list_objects(f"{root}/meta/")}
    assert left == {key for i in live.items() for key in keys[i]}


# --- a node leads the live incarnation only (reconciler/node.py) -------------------


def test_a_node_leading_orders_at_2_steps_down_and_leads_orders_at_4_after_a_recreate(
    store: S3ObjectStore,
) -> None:
    asyncio.run(_step_down_scenario(store))


async def _step_down_scenario(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    old = controller.create_topic("orders", 1).partition_id(0)
    node, ownership = reconciler_node(
        store,
        ROOT,
        "node-a",
        LeaderDirectory(),
        settings=eager_settings(),
        policy=QUICK_POLICY,
    )
    ownership.start()
    try:
        for _ in range(3):
            await node.run_round()
        assert node.led_partitions() == [old]
        await asyncio.to_thread(controller.delete_topic, "orders")
        new = (await asyncio.to_thread(controller.create_topic, "orders", 1)).partition_id(0)
        for _ in range(3):
            await node.run_round()
        assert node.led_partitions() == [new], "the old incarnation's leader stepped down"
        await publish_report_now(node)
        reports, _ = await asyncio.to_thread(read_reports, store, ROOT)
        assert [e.pid for r in reports for e in r.partitions] == [new]
    finally:
        await node.stop()
