"""The ``stall-{id}`` switch of ``epochgc verify``'s workers: which store
calls a stalled loop's fault applies to (and which it must leave alone, the
lease heartbeat's)."""

from __future__ import annotations

import pytest

from epochgc.verify.worker import stall_of


def test_a_stalled_rounds_loop_meets_every_call_under_the_partitions() -> None:
    mode, applies = stall_of("hang rounds", "epochgc")
    assert mode == "hang"
    assert applies("PutObject", "epochgc/meta/partitions/orders/1/0/log/00000000000000000003")
    assert applies("ListObjectsV2", "epochgc/meta/partitions/")
    assert not applies("PutObject", "epochgc/meta/nodes/node-1"), "the heartbeat goes on"
    assert not applies("GetObject", "epochgc/meta/controller/00000000000000000001")


def test_a_stalled_ownership_loop_meets_only_the_listing_of_the_node_leases() -> None:
    mode, applies = stall_of("fail ownership", "epochgc")
    assert mode == "fail"
    assert applies("ListObjectsV2", "epochgc/meta/nodes/")
    assert not applies("PutObject", "epochgc/meta/nodes/node-1"), "the heartbeat goes on"
    assert not applies("GetObject", "epochgc/meta/nodes/node-1")


@pytest.mark.parametrize("spec", ["hang", "stop rounds", "hang leases", "fail rounds now"])
def test_a_bad_switch_is_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        stall_of(spec, "epochgc")
