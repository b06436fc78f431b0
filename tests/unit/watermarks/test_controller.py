"""The pure half of the controller: folding entries, the bounded epoch
clock, and the snapshot that stands for a prefix of the log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.watermarks.controller import (
    ControllerView,
    EpochStarts,
    fold_controller,
    restore_snapshot,
    snapshot_of,
)
from epochgc.watermarks.controller_codec import (
    ControllerEntry,
    CreateTopic,
    DeletedTopic,
    DeleteTopic,
    EpochTick,
    decode_controller_entry,
    decode_controller_snapshot,
    encode_controller_entry,
    encode_controller_snapshot,
)

T0 = datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC)


def fold_all(
    entries: list[ControllerEntry],
    capacity: int,
    view: ControllerView | None = None,
    starts: EpochStarts | None = None,
) -> tuple[ControllerView, EpochStarts]:
    view = view or ControllerView.empty()
    starts = starts or EpochStarts(capacity)
    for entry in entries:
        offset = view.offset + 1
        view = fold_controller(view, offset, entry)
        starts.record(offset, entry.ts)
    return view, starts


@st.composite
def controller_logs(draw: st.DrawFn) -> list[ControllerEntry]:
    """Random create/delete/tick sequences over a few names (so names are
    re-created), with times as they come back from the log (whole seconds,
    sometimes going back a little: writers' clocks differ)."""
    size = draw(st.integers(0, 40))
    entries: list[ControllerEntry] = []
    seconds = 0
    for _ in range(size):
        seconds = max(0, seconds + draw(st.integers(-5, 120)))
        ts = T0 + timedelta(seconds=seconds)
        kind = draw(st.sampled_from(["create", "delete", "tick", "tick"]))
        name = draw(st.sampled_from(["orders", "audit", "clicks"]))
        if kind == "create":
            config = draw(st.sampled_from([{}, {"retention.local.target.ms": 60000}]))
            entries.append(CreateTopic(name, draw(st.integers(1, 8)), config, ts))
        elif kind == "delete":
            # Named revisions: a live one, a dead or never-created one (a
            # late or retried append), or none (an entry written before v2).
            revision = draw(st.none() | st.integers(1, max(1, len(entries))))
            entries.append(DeleteTopic(name, ts, revision, draw(st.sampled_from(["", "n1"]))))
        else:
            entries.append(EpochTick(ts))
    # As read back: through the entry codec.
    return [decode_controller_entry(encode_controller_entry(e)) for e in entries]


@given(entries=controller_logs(), data=st.data(), capacity=st.integers(1, 12))
def test_snapshot_of_a_prefix_plus_the_rest_folds_like_the_whole_log(
    entries: list[ControllerEntry], data: st.DataObject, capacity: int
) -> None:
    """Reading the snapshot at any offset and then the entries after it
    gives exactly the view (and epoch clock) of replaying from offset 1."""
    cut = data.draw(st.integers(0, len(entries)))
    whole_view, whole_starts = fold_all(entries, capacity)

    prefix_view, prefix_starts = fold_all(entries[:cut], capacity)
    stored = encode_controller_snapshot(snapshot_of(prefix_view, prefix_starts))
    view, starts = restore_snapshot(decode_controller_snapshot(stored), capacity)
    view, starts = fold_all(entries[cut:], capacity, view, starts)

    assert view == whole_view
    assert snapshot_of(view, starts) == snapshot_of(whole_view, whole_starts)
    for epoch in range(0, len(entries) + 2):
        assert starts.started_at(epoch) == whole_starts.started_at(epoch)


@given(entries=controller_logs(), capacity=st.integers(1, 12))
def test_epoch_clock_is_exact_for_recent_epochs_and_never_overstates_age(
    entries: list[ControllerEntry], capacity: int
) -> None:
    """Retention drops a record only if its epoch started before a cutoff:
    an answer later than the true start is safe (kept longer), an earlier
    one is not. Recent epochs are exact; older ones get an upper bound."""
    _view, starts = fold_all(entries, capacity)
    newest = len(entries)
    for epoch, entry in enumerate(entries, start=1):
        answer = starts.started_at(epoch)
        assert answer is not None
        if epoch > newest - capacity:
            assert answer == entry.ts
        else:
            assert answer >= entry.ts
    assert starts.started_at(0) is None, "epoch 0 is before anything"
    assert starts.started_at(newest + 1) is None, "not read yet: unknown, counted as new"
    assert len(starts.items()) == min(capacity, newest)


def test_a_deleted_incarnation_is_kept_by_name_and_revision() -> None:
    view, _ = fold_all(
        [
            CreateTopic("orders", 2, {}, T0),  # revision 1
            DeleteTopic("orders", T0),  # at 2
            CreateTopic("orders", 4, {}, T0),  # revision 3
            DeleteTopic("orders", T0),  # at 4
            CreateTopic("orders", 1, {}, T0),  # revision 5, live
            DeleteTopic("ghost", T0),  # not live: changes nothing
        ],
        capacity=10,
    )
    assert view.offset == 6
    assert view.topics["orders"].revision == 5
    assert view.deleted == {
        ("orders", 1): DeletedTopic("orders", 1, 2),
        ("orders", 3): DeletedTopic("orders", 3, 4),
    }


def test_epoch_clock_refuses_out_of_order_epochs_and_a_zero_capacity() -> None:
    starts = EpochStarts(3)
    starts.record(5, T0)
    with pytest.raises(ValueError, match="out of order"):
        starts.record(5, T0)
    with pytest.raises(ValueError, match=">= 1"):
        EpochStarts(0)


def test_a_smaller_reader_capacity_trims_a_snapshot_safely() -> None:
    entries: list[ControllerEntry] = [EpochTick(T0 + timedelta(minutes=i)) for i in range(10)]
    view, starts = fold_all(entries, capacity=10)
    _, small = restore_snapshot(snapshot_of(view, starts), capacity=3)
    assert [e for e, _ in small.items()] == [8, 9, 10]
    assert small.started_at(7) == T0 + timedelta(minutes=6), "the latest dropped start"
    assert small.started_at(1) == T0 + timedelta(minutes=6), "an upper bound, never earlier"


@given(entries=controller_logs())
def test_an_incarnation_ends_only_by_a_delete_that_named_it(
    entries: list[ControllerEntry],
) -> None:
    """Whatever order deletes land in, an incarnation ends only at a
    ``delete_topic`` that names its revision (or, written before v2, names
    none); a delete naming another revision changes nothing."""
    view = ControllerView.empty()
    for offset, entry in enumerate(entries, start=1):
        before = view
        view = fold_controller(view, offset, entry)
        ended = set(before.topics) - set(view.topics)
        if not isinstance(entry, DeleteTopic):
            assert not ended
            continue
        live = before.topics.get(entry.topic)
        if live is not None and entry.revision in (None, live.revision):
            assert ended == {entry.topic}
            assert view.deleted[(entry.topic, live.revision)].deleted_at == offset
        else:
            assert view == ControllerView(offset, before.topics, before.deleted), "not a no-op"


def test_a_delete_naming_an_older_incarnation_leaves_the_live_one() -> None:
    view = ControllerView.empty()
    for offset, entry in enumerate(
        [
            CreateTopic("orders", 1, {}, T0),  # orders@1
            DeleteTopic("orders", T0, 1),  # 2
            CreateTopic("orders", 1, {}, T0),  # orders@3
            DeleteTopic("orders", T0, 1),  # a late retry of the first delete
        ],
        start=1,
    ):
        view = fold_controller(view, offset, entry)
    assert view.topics["orders"].revision == 3
    assert view.deleted == {("orders", 1): DeletedTopic("orders", 1, 2)}
    legacy = fold_controller(view, 5, DeleteTopic("orders", T0))
    assert "orders" not in legacy.topics, "an entry without a revision keeps its old meaning"
    assert legacy.deleted[("orders", 3)] == DeletedTopic("orders", 3, 5)


def test_entries_differ_by_their_nonce_and_keep_revision_and_nonce() -> None:
    one = DeleteTopic("orders", T0, 4, "a1")
    two = DeleteTopic("orders", T0, 4, "b2")
    assert encode_controller_entry(one) != encode_controller_entry(two)
    assert decode_controller_entry(encode_controller_entry(one)) == one
    tick = EpochTick(T0, "c3")
    assert decode_controller_entry(encode_controller_entry(tick)) == tick
