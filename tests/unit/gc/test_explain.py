"""``gc explain``: the verdict and every reason, one case per reason."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from epochgc.gc.control import pause
from epochgc.gc.explain import (
    ExplainInputs,
    PinningPartition,
    explain,
    explanation_view,
    read_explain_inputs,
)
from epochgc.leases.holder_codec import OwnerDocument, encode_owner
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import PartitionId, encode_l0_key, owner_key
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.reports import StuckCause

NOW = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)
UUID = "0b7c4c39-8f0e-4f57-9a8e-6d1f1f2f3a4b"
KEY = encode_l0_key("epochgc", 3, 40, UUID)
STUCK = StuckCause("missing", "epochgc/l0/001/000000000000000039/x", 2, 4, NOW)
PINS = (
    PinningPartition("orders", 2, 0, 38, "node-a", owner="node-a", lag_records=3, stuck=STUCK),
    PinningPartition("orders", 2, 1, 45, "node-b"),
)
BASE = ExplainInputs(
    key=KEY,
    root="epochgc",
    safe_epoch=50,
    pinning=(),
    last_modified=NOW - timedelta(hours=2),
    min_object_age=timedelta(hours=1),
    now=NOW,
)


def codes(inputs: ExplainInputs) -> tuple[bool, list[str]]:
    result = explain(inputs)
    return result.deletable, [r.code for r in result.reasons]


def test_an_old_object_at_or_below_m_is_deletable() -> None:
    assert codes(BASE) == (True, ["eligible", "at_or_below_safe_epoch"])
    assert explain(BASE).epoch == 40


def test_keys_that_are_not_l0_keys_of_this_root_are_never_deletable() -> None:
    assert codes(dataclasses.replace(BASE, key="other/l0/003/x")) == (False, ["outside_root"])
    assert codes(dataclasses.replace(BASE, key="epochgc/l0/3/40/x")) == (False, ["unparseable"])
    sibling = dataclasses.replace(BASE, root="epoch")
    assert codes(sibling)[1] == ["outside_root"], "a sibling root sharing the prefix"


def test_above_m_names_the_pinning_partitions_with_owner_lag_and_cause() -> None:
    inputs = dataclasses.replace(BASE, safe_epoch=38, pinning=PINS)
    result = explain(inputs)
    assert not result.deletable
    assert [r.code for r in result.reasons] == ["above_safe_epoch"]
    assert result.pinning == PINS[:1], "only partitions below the object's epoch pin it"
    text = result.reasons[0].text
    assert "epoch 40 > M 38" in text
    assert "orders/0" in text and "owned by node-a" in text and "lag 3 records" in text
    assert "stuck: missing" in text and "orders/1" not in text


def test_too_young_missing_paused_and_blocked() -> None:
    young = dataclasses.replace(BASE, last_modified=NOW - timedelta(minutes=5))
    assert codes(young) == (False, ["at_or_below_safe_epoch", "too_young"])
    assert codes(dataclasses.replace(BASE, last_modified=None)) == (
        False,
        ["missing", "at_or_below_safe_epoch"],
    )
    paused = dataclasses.replace(BASE, paused=True, paused_by="ops", paused_reason="audit")
    deletable, found = codes(paused)
    assert not deletable and found[-1] == "paused"
    assert "by ops: audit" in explain(paused).reasons[-1].text
    assert codes(dataclasses.replace(BASE, safe_epoch=None)) == (False, ["safety_blocked"])


def test_the_guard_is_mentioned_but_does_not_block_one_object() -> None:
    guarded = dataclasses.replace(BASE, max_delete_fraction=0.5)
    assert codes(guarded) == (True, ["eligible", "at_or_below_safe_epoch", "guard"])
    assert "50%" in explain(guarded).reasons[-1].text


def read(
    store: MemoryStore, *, max_delete_fraction: float = 1.0, pinning: int = 10
) -> ExplainInputs:
    return read_explain_inputs(
        store,
        "epochgc",
        KEY,
        min_object_age=timedelta(hours=1),
        max_delete_fraction=max_delete_fraction,
        pinning=pinning,
        now=NOW,
    )


def test_the_inputs_are_read_from_the_bucket_with_the_owner_of_each_pinning_partition(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    revision = Controller(store, "epochgc").create_topic("orders", 2).revision
    store.put(KEY, b"l0")
    owned = PartitionId("orders", revision, 0)
    store.put(owner_key("epochgc", owned), encode_owner(OwnerDocument("node-a", "i1", 1, NOW)))
    store.put(owner_key("epochgc", PartitionId("orders", revision, 1)), b"not json")
    pause(store, "epochgc", by="ops@host", reason="audit", now=NOW)

    inputs = read(store, max_delete_fraction=0.5)

    assert (inputs.safe_epoch, inputs.paused, inputs.paused_by) == (revision - 1, True, "ops@host")
    assert inputs.last_modified is not None and inputs.max_delete_fraction == 0.5
    assert [(p.partition, p.owner, p.lag_records) for p in inputs.pinning] == [
        (0, "node-a", 0),
        (1, None, 0),
    ]
    assert "ownership record unreadable" in caplog.text
    store.delete(KEY)
    gone = read(store, pinning=1)
    assert gone.last_modified is None and len(gone.pinning) == 1


def test_the_view_prints_the_verdict_then_one_line_per_reason() -> None:
    inputs = dataclasses.replace(BASE, safe_epoch=30, pinning=PINS)
    data, lines = explanation_view(KEY, explain(inputs))
    assert lines[0] == f"{KEY}: not deletable (epoch 40, M 30)"
    assert lines[1].startswith("  x above_safe_epoch: epoch 40 > M 30")
    assert data["deletable"] is False and data["epoch"] == 40
    pinning = data["pinning"]
    assert isinstance(pinning, list) and [p["partition"] for p in pinning] == [0]
    assert pinning[0]["stuck"] == STUCK.to_json() and pinning[0]["lag_records"] == 3
