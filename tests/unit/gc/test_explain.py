"""``gc explain``: the verdict and every reason, one case per reason."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from epochgc.gc.explain import ExplainInputs, PinningPartition, explain
from epochgc.storage.keys import encode_l0_key
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
