"""The ``stall-{id}`` switch of ``epochgc verify``'s workers: which store
calls a stalled loop's fault applies to (and which it must leave alone, the
lease heartbeat's)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.verify.faults import FaultPlan, FaultyStore
from epochgc.verify.switches import set_stall_switch, stall_switch, take_stall_switch
from epochgc.verify.worker import _watch, stall_of


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


def test_a_switch_seen_before_its_text_is_taken_once_the_text_is_there(tmp_path: Path) -> None:
    """Seen in ``make soak`` (seed 13): the driver's switch existed a moment
    before its text; the watcher read "", its thread died on it, and the
    stall the driver had counted never came ("its rounds loop hung, did
    not exit within 33 s")."""
    store = FaultyStore(MemoryStore(VirtualClock()), FaultPlan(), seed=1)
    stop = threading.Event()
    switch = stall_switch(tmp_path, "node-1")
    switch.touch()  # created, not written yet
    watcher = threading.Thread(target=_watch, args=(tmp_path, store, "node-1", "epochgc", stop))
    watcher.start()
    try:
        time.sleep(0.5)
        assert watcher.is_alive() and store.stall is None and switch.exists()
        switch.write_text("hang rounds")
        deadline = time.monotonic() + 5
        while store.stall is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.stall is not None and store.stall[0] == "hang"
        assert not switch.exists(), "taken once"
    finally:
        stop.set()
        watcher.join(5)


def test_a_switch_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    set_stall_switch(tmp_path, "node-1", "fail ownership")
    assert [p.name for p in tmp_path.iterdir()] == ["stall-node-1"]
    assert take_stall_switch(tmp_path, "node-1") == "fail ownership"
    assert take_stall_switch(tmp_path, "node-1") is None
