"""Key codecs: round trips, ordering, and rejection of near misses."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.storage import keys
from epochgc.storage.keys import (
    EPOCH_MAX,
    OFFSET_MAX,
    L0Key,
    encode_l0_key,
    encode_l1_key,
    encode_log_entry_key,
    parse_l0_key,
    parse_l1_key,
    parse_log_entry_key,
)

ROOT = "epochgc"
UUID = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"

roots = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789._=-", min_size=1, max_size=12).filter(
        lambda s: s not in (".", "..")
    ),
    min_size=1,
    max_size=3,
).map("/".join)
shards = st.integers(min_value=0, max_value=999)
epochs = st.integers(min_value=0, max_value=EPOCH_MAX)
uuids = st.uuids().map(str)
topics = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=40,
).filter(lambda s: s not in (".", ".."))
offsets = st.integers(min_value=0, max_value=OFFSET_MAX)


@given(roots, shards, epochs, uuids)
def test_l0_round_trip(root: str, shard: int, epoch: int, object_id: str) -> None:
    key = encode_l0_key(root, shard, epoch, object_id)
    assert parse_l0_key(key, root) == L0Key(shard, epoch, object_id, root)


@given(shards, st.lists(st.tuples(epochs, uuids), min_size=2, max_size=20))
def test_keys_of_one_shard_sort_by_epoch(shard: int, items: list[tuple[int, str]]) -> None:
    encoded = [encode_l0_key(ROOT, shard, e, u) for e, u in items]
    parsed_in_key_order = [parse_l0_key(k, ROOT) for k in sorted(encoded)]
    epochs_in_key_order = [p.epoch for p in parsed_in_key_order if p is not None]
    assert epochs_in_key_order == sorted(e for e, _ in items)


@pytest.mark.parametrize(
    "key",
    [
        f"epochgc/l0/5/000000000000000007/{UUID}",  # unpadded shard
        f"epochgc/l0/0005/000000000000000007/{UUID}",  # four-digit shard
        f"epochgc/l0/005/-00000000000000007/{UUID}",  # negative epoch
        f"epochgc/l0/005/7/{UUID}",  # unpadded epoch
        f"epochgc/l0/005/0000000000000000007/{UUID}",  # 19-digit epoch
        f"epochgc/l0/005/000000000000000007/{UUID}/extra",  # extra segment
        f"epochgc/l0/005/000000000000000007/x/{UUID}",  # extra segment in the middle
        "epochgc/l0/005/000000000000000007",  # missing id
        f"epochgc/l0/005/000000000000000007/{UUID}/",  # trailing slash
        f"epochgc/l0/005/000000000000000007/{UUID.upper()}",  # non-canonical uuid
        f"epochgc/l0/005/000000000000000007/{UUID}.tmp",  # suffix
        f"epochgc/l0/005/000000000000000007/{UUID[:-1]}",  # short uuid
        f"epochgc2/l0/005/000000000000000007/{UUID}",  # sibling root sharing the prefix
        f"/epochgc/l0/005/000000000000000007/{UUID}",  # leading slash
        f"epochgc//l0/005/000000000000000007/{UUID}",  # empty segment
        f"x/epochgc/l0/005/000000000000000007/{UUID}",  # root not at the start
        f"epochgc/l1/005/000000000000000007/{UUID}",  # wrong family
        f"epochgc/L0/005/000000000000000007/{UUID}",  # wrong case
        f"epochgc/l0/00a/000000000000000007/{UUID}",  # non-digit shard
        f"epochgc/l0/005/00000000000000000７/{UUID}",  # non-ASCII digit  # noqa: RUF001
        "",
    ],
)
def test_l0_near_misses_are_rejected(key: str) -> None:
    assert parse_l0_key(key, ROOT) is None


def test_a_root_that_prefixes_another_root_is_not_confused() -> None:
    key_of_longer = encode_l0_key("epochgc2", 1, 5, UUID)
    key_of_shorter = encode_l0_key("epochgc", 1, 5, UUID)
    assert parse_l0_key(key_of_longer, "epochgc") is None
    assert parse_l0_key(key_of_shorter, "epochgc2") is None
    assert parse_l0_key(encode_l0_key("a/b", 1, 5, UUID), "a") is None


@pytest.mark.parametrize("root", ["", "/", "a/", "/a", "a//b", ".", "..", "a/../b", "a b"])
def test_invalid_roots_are_refused(root: str) -> None:
    assert not keys.is_valid_root(root)
    assert parse_l0_key(f"{root}/l0/001/000000000000000001/{UUID}", root) is None
    with pytest.raises(ValueError):
        encode_l0_key(root, 1, 1, UUID)


@given(st.text(max_size=200), roots)
def test_parse_never_raises(text: str, root: str) -> None:
    parse_l0_key(text, root)
    parse_l1_key(text, root)
    keys.parse_partition_meta_key(text, root)
    parse_log_entry_key(text, f"{root}/meta/controller/")
    keys.parse_report_key(text, root)


@given(shards, epochs, uuids, st.data())
def test_a_mutated_key_never_parses_to_a_different_key(
    shard: int, epoch: int, object_id: str, data: st.DataObject
) -> None:
    """Changing one character either breaks the parse or yields a key whose
    re-encoding is exactly the mutated text: the parser never guesses."""
    key = encode_l0_key(ROOT, shard, epoch, object_id)
    position = data.draw(st.integers(min_value=0, max_value=len(key) - 1))
    replacement = data.draw(st.characters(codec="utf-8"))
    mutated = key[:position] + replacement + key[position + 1 :]
    parsed = parse_l0_key(mutated, ROOT)
    if parsed is not None:
        assert encode_l0_key(ROOT, parsed.shard, parsed.epoch, parsed.object_id) == mutated


@pytest.mark.parametrize(
    ("shard", "epoch", "object_id"),
    [(-1, 0, UUID), (1000, 0, UUID), (0, -1, UUID), (0, EPOCH_MAX + 1, UUID), (0, 0, "nope")],
)
def test_encode_refuses_out_of_range(shard: int, epoch: int, object_id: str) -> None:
    with pytest.raises(ValueError):
        encode_l0_key(ROOT, shard, epoch, object_id)


@given(roots, topics, st.integers(1, 10**12), st.integers(0, 10_000), offsets, offsets, uuids)
def test_l1_round_trip(
    root: str, topic: str, revision: int, partition: int, a: int, b: int, object_id: str
) -> None:
    first, last = min(a, b), max(a, b)
    pid = keys.PartitionId(topic, revision, partition)
    key = encode_l1_key(root, pid, first, last, object_id)
    parsed = parse_l1_key(key, root)
    assert parsed is not None
    assert (parsed.partition_id, parsed.first_offset, parsed.last_offset) == (pid, first, last)
    assert parse_l0_key(key, root) is None
    assert key.startswith(keys.partition_l1_prefix(root, pid))
    assert key.startswith(keys.topic_l1_prefix(root, topic, revision))


@pytest.mark.parametrize(
    "key",
    [
        f"epochgc/l1/orders/3/01/{0:020d}-{5:020d}-{UUID}",  # padded partition
        f"epochgc/l1/orders/03/1/{0:020d}-{5:020d}-{UUID}",  # padded revision
        f"epochgc/l1/orders/0/1/{0:020d}-{5:020d}-{UUID}",  # revision 0
        f"epochgc/l1/orders/3/1/{9:020d}-{5:020d}-{UUID}",  # first > last
        f"epochgc/l1/ord ers/3/1/{0:020d}-{5:020d}-{UUID}",  # bad topic
        f"epochgc/l1/../3/1/{0:020d}-{5:020d}-{UUID}",  # dot-dot topic
        f"epochgc/l1/orders/3/1/{0:019d}-{5:020d}-{UUID}",  # short offset
        f"epochgc/l1/orders/3/1/x/{0:020d}-{5:020d}-{UUID}",  # extra segment
        f"epochgc/l1/orders/1/{0:020d}-{5:020d}-{UUID}",  # layout 1: no revision
    ],
)
def test_l1_near_misses_are_rejected(key: str) -> None:
    assert parse_l1_key(key, ROOT) is None


@given(st.lists(offsets, min_size=1, max_size=30, unique=True))
def test_log_entry_keys_round_trip_and_sort_numerically(values: list[int]) -> None:
    prefix = keys.controller_log_prefix(ROOT)
    encoded = [encode_log_entry_key(prefix, v) for v in values]
    assert [parse_log_entry_key(k, prefix) for k in encoded] == values
    assert [parse_log_entry_key(k, prefix) for k in sorted(encoded)] == sorted(values)


def test_log_entry_key_rejects_other_logs_and_bad_offsets() -> None:
    pid = keys.PartitionId("orders", 12, 3)
    prefix = keys.partition_log_prefix(ROOT, pid)
    assert prefix == "epochgc/meta/partitions/orders/12/3/log/"
    assert parse_log_entry_key(f"{prefix}{7:019d}", prefix) is None
    assert parse_log_entry_key(f"{prefix}-{7:019d}", prefix) is None
    assert parse_log_entry_key(keys.partition_snapshot_key(ROOT, pid), prefix) is None
    other = keys.partition_log_prefix(ROOT, keys.PartitionId("orders", 12, 33))
    assert parse_log_entry_key(encode_log_entry_key(other, 1), prefix) is None
    again = keys.partition_log_prefix(ROOT, keys.PartitionId("orders", 13, 3))
    assert parse_log_entry_key(encode_log_entry_key(again, 1), prefix) is None


def test_partition_meta_keys_name_their_incarnation() -> None:
    pid = keys.PartitionId("orders", 12, 3)
    assert keys.parse_partition_meta_key(keys.partition_snapshot_key(ROOT, pid), ROOT) == pid
    log_key = encode_log_entry_key(keys.partition_log_prefix(ROOT, pid), 5)
    assert keys.parse_partition_meta_key(log_key, ROOT) == pid
    assert keys.topic_meta_prefix(ROOT, "orders", 12) == "epochgc/meta/partitions/orders/12/"
    for near_miss in (
        "epochgc/meta/partitions/orders/3/log/00000000000000000005",  # layout 1
        "epochgc/meta/partitions/orders/012/3/snapshot",
        "epochgc/meta/partitions/orders/12/03/snapshot",
        "epochgc2/meta/partitions/orders/12/3/snapshot",
    ):
        assert keys.parse_partition_meta_key(near_miss, ROOT) is None


def test_controller_snapshot_key_is_beside_the_log_but_never_an_entry() -> None:
    prefix = keys.controller_log_prefix(ROOT)
    snapshot = keys.controller_snapshot_key(ROOT)
    assert snapshot == "epochgc/meta/controller/snapshot"
    assert parse_log_entry_key(snapshot, prefix) is None
    assert snapshot > encode_log_entry_key(prefix, OFFSET_MAX), "lists after every entry"


def test_layout_paths_match_the_design() -> None:
    assert keys.lease_key(ROOT, "gc") == "epochgc/meta/leases/gc"
    assert keys.report_key(ROOT, "reconciler-1") == "epochgc/meta/reports/reconciler-1"
    assert keys.parse_report_key("epochgc/meta/reports/reconciler-1", ROOT) == "reconciler-1"
    assert keys.parse_report_key("epochgc/meta/reports/a/b", ROOT) is None
    assert keys.gc_run_summary_key(ROOT, "r1") == "epochgc/gc/runs/r1/summary.json"
    assert keys.l0_shard_prefix(ROOT, 7) == "epochgc/l0/007/"
    assert encode_l0_key(ROOT, 7, 42, UUID) == f"epochgc/l0/007/{42:018d}/{UUID}"


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "a" * 250, "ü", "a b"])
def test_invalid_topics_are_refused(topic: str) -> None:
    assert not keys.is_valid_topic(topic)
    with pytest.raises(ValueError, match="topic"):
        keys.partition_log_prefix(ROOT, keys.PartitionId(topic, 1, 0))


def test_uuid4_strings_are_valid_object_ids() -> None:
    assert all(keys.is_valid_uuid(str(uuid.uuid4())) for _ in range(100))


node_ids = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=64,
).filter(lambda s: s not in (".", ".."))


@given(roots, node_ids)
def test_node_lease_keys_round_trip(root: str, node_id: str) -> None:
    key = keys.node_lease_key(root, node_id)
    assert key.startswith(keys.nodes_prefix(root))
    assert keys.parse_node_lease_key(key, root) == node_id


@given(roots, topics, st.integers(1, keys.OFFSET_MAX), st.integers(0, 9_999_999_999))
def test_owner_keys_round_trip(root: str, topic: str, revision: int, partition: int) -> None:
    pid = keys.PartitionId(topic, revision, partition)
    key = keys.owner_key(root, pid)
    assert key.startswith(keys.owners_prefix(root))
    assert keys.parse_owner_key(key, root) == pid


@pytest.mark.parametrize(
    "key",
    [
        "epochgc/meta/owners/orders/7",  # no partition
        "epochgc/meta/owners/orders/7/0/extra",
        "epochgc/meta/owners/orders/07/0",  # padded revision
        "epochgc/meta/owners/orders/0/0",  # revision 0 is before anything
        "epochgc/meta/owners/orders/7/01",
        "epochgc/meta/owners/../7/0",
        "epochgc2/meta/owners/orders/7/0",
        "epochgc/meta/leases/partition.orders.7.0",
    ],
)
def test_owner_key_near_misses_are_rejected(key: str) -> None:
    assert keys.parse_owner_key(key, ROOT) is None


@pytest.mark.parametrize(
    "key",
    ["epochgc/meta/nodes/", "epochgc/meta/nodes/a/b", "epochgc/meta/nodes/..", "x/meta/nodes/n"],
)
def test_node_lease_key_near_misses_are_rejected(key: str) -> None:
    assert keys.parse_node_lease_key(key, ROOT) is None


def test_node_and_owner_keys_match_the_design() -> None:
    pid = keys.PartitionId("orders", 7, 3)
    assert keys.node_lease_key(ROOT, "reconciler-1") == "epochgc/meta/nodes/reconciler-1"
    assert keys.owner_key(ROOT, pid) == "epochgc/meta/owners/orders/7/3"
    with pytest.raises(ValueError):
        keys.node_lease_key(ROOT, "a/b")
    with pytest.raises(ValueError):
        keys.owner_key(ROOT, keys.PartitionId("bad/topic", 7, 3))
