"""The simulation's ghost of topic incarnations: it folds the topic
entries that landed by the contract's rule, finds a product view that
ended an incarnation no delete named (the recreate race) and a deletion
of a live incarnation's keys (the janitor), and lets the rest pass."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.simulate.cluster import Violation
from epochgc.simulate.topic_ghost import TopicGhost
from epochgc.storage.keys import (
    PartitionId,
    encode_l0_key,
    encode_l1_key,
    owner_key,
    partition_snapshot_key,
)
from epochgc.watermarks.controller import ControllerView, TopicInfo, fold_controller
from epochgc.watermarks.controller_codec import ControllerEntry, CreateTopic, DeleteTopic, EpochTick

ROOT = "epochgc"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def create(name: str, partitions: int = 2) -> CreateTopic:
    return CreateTopic(name, partitions, {}, T0)


def delete(name: str, revision: int | None) -> DeleteTopic:
    return DeleteTopic(name, T0, revision)


def ghost_after(entries: list[ControllerEntry]) -> TopicGhost:
    ghost = TopicGhost(ROOT, Violation)
    for offset, entry in enumerate(entries, start=1):
        ghost.entry_landed(offset, entry)
    return ghost


def view(offset: int, **live: tuple[int, int]) -> ControllerView:
    """``name=(revision, partitions)`` for each live topic."""
    topics = {name: TopicInfo(name, parts, rev) for name, (rev, parts) in live.items()}
    return ControllerView(offset, topics)


def test_a_delete_written_before_a_recreate_ends_nothing_when_it_lands_after() -> None:
    ghost = ghost_after(
        [create("orders"), delete("orders", 1), create("orders"), delete("orders", 1)]
    )
    assert ghost.live == {"orders": ("orders", 3)}
    assert ghost.ended == {("orders", 1): 2}
    assert ghost.is_ended(PartitionId("orders", 1, 1))
    assert not ghost.is_ended(PartitionId("orders", 3, 1))
    assert ghost.live_partitions() == [PartitionId("orders", 3, 0), PartitionId("orders", 3, 1)]
    ghost.check_view(view(4, orders=(3, 2)))


def test_a_view_that_let_a_late_delete_end_the_new_incarnation_is_a_violation() -> None:
    ghost = ghost_after(
        [create("orders"), delete("orders", 1), create("orders"), delete("orders", 1)]
    )
    with pytest.raises(Violation) as caught:
        ghost.check_view(view(4))  # what a fold ending by name alone holds
    assert caught.value.invariant == "incarnation ended without a delete naming it"
    assert "orders@3" in caught.value.detail


def test_a_view_holding_an_incarnation_the_entries_ended_is_a_violation() -> None:
    ghost = ghost_after([create("orders"), delete("orders", 1)])
    with pytest.raises(Violation, match="holds orders@1 live"):
        ghost.check_view(view(2, orders=(1, 2)))


def test_a_delete_naming_no_revision_that_ends_an_incarnation_is_a_violation() -> None:
    """The contract lets such an entry end whichever incarnation is live;
    only a writer from before revisions were named writes one, and the
    simulation runs none."""
    ghost = ghost_after([create("orders"), delete("orders", 1), create("orders")])
    ghost.entry_landed(4, delete("clicks", None))  # ends nothing: no violation
    with pytest.raises(Violation, match="naming no revision landed at offset 5 and ended orders@3"):
        ghost.entry_landed(5, delete("orders", None))
    assert ghost.live == {}
    assert ghost.ended == {("orders", 1): 2, ("orders", 3): 5}


def test_deleting_a_live_incarnations_keys_is_a_violation_and_an_ended_ones_is_not() -> None:
    ghost = ghost_after([create("orders"), delete("orders", 1), create("orders")])
    old, new = PartitionId("orders", 1, 1), PartitionId("orders", 3, 1)
    ghost.deleted(
        (
            partition_snapshot_key(ROOT, old),
            owner_key(ROOT, old),
            encode_l1_key(ROOT, old, 0, 9, "00000000-0000-4000-8000-000000000001"),
            encode_l0_key(ROOT, 0, 1, "00000000-0000-4000-8000-000000000002"),
        ),
        "collector",
    )
    for key in (
        partition_snapshot_key(ROOT, new),
        owner_key(ROOT, new),
        encode_l1_key(ROOT, new, 0, 9, "00000000-0000-4000-8000-000000000003"),
    ):
        with pytest.raises(Violation, match="which is live"):
            ghost.deleted((key,), "collector")


def test_a_topic_entry_landing_below_one_folded_is_refused() -> None:
    """Slots fill in order; the world drops a late write into a slot
    compaction truncated before it reaches the ghost
    (``test_world_controller.py``), so one out of order is a broken run."""
    ghost = TopicGhost(ROOT, Violation)
    assert ghost.entry_landed(1, create("orders"))
    assert ghost.entry_landed(3, create("orders"))  # a no-op while orders@1 is live
    with pytest.raises(ValueError, match="offset 2 landed after one at 3"):
        ghost.entry_landed(2, delete("orders", 1))
    assert ghost.live == {"orders": ("orders", 1)}
    assert not ghost.entry_landed(4, EpochTick(T0))


names = st.sampled_from(["a", "b"])


@st.composite
def topic_logs(draw: st.DrawFn) -> list[ControllerEntry]:
    """Creates, deletes naming a revision (live or not, as a late writer's
    may be), and ticks."""
    entries: list[ControllerEntry] = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["create", "delete", "tick"]))
        if kind == "create":
            entries.append(create(draw(names), draw(st.integers(1, 3))))
        elif kind == "delete":
            entries.append(delete(draw(names), draw(st.integers(1, len(entries) + 1))))
        else:
            entries.append(EpochTick(T0))
    return entries


@given(topic_logs())
def test_the_ghost_agrees_with_the_products_fold_on_every_log(
    entries: list[ControllerEntry],
) -> None:
    ghost = TopicGhost(ROOT, Violation)
    product = ControllerView.empty()
    for offset, entry in enumerate(entries, start=1):
        ghost.entry_landed(offset, entry)
        product = fold_controller(product, offset, entry)
        ghost.check_view(product)
    assert set(ghost.ended) == set(product.deleted)
