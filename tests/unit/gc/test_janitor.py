"""The janitor's decision: only incarnations the view proves deleted."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from epochgc.gc.janitor import dead_incarnations
from epochgc.watermarks.controller import ControllerView, fold_controller
from epochgc.watermarks.controller_codec import CreateTopic, DeleteTopic, EpochTick

TS = datetime(2026, 11, 23, tzinfo=UTC)

ops = st.lists(
    st.tuples(st.sampled_from(["create", "delete", "tick"]), st.sampled_from(["a", "b", "a.1"])),
    max_size=30,
)


@given(
    ops,
    st.integers(0, 30),
    st.lists(st.tuples(st.sampled_from(["a", "b", "x"]), st.integers(1, 40)), max_size=6),
)
def test_never_a_live_or_future_incarnation_and_every_deleted_one(
    operations: list[tuple[str, str]], cut: int, strangers: list[tuple[str, int]]
) -> None:
    """Random create/delete/recreate sequences: judged at any prefix of the
    log, the dead set holds exactly the incarnations created and deleted by
    then; never a live one, never one created after the view."""
    view = ControllerView.empty()
    created: list[tuple[str, int]] = []
    views = [view]
    for offset, (kind, topic) in enumerate(operations, start=1):
        if kind == "create":
            entry: CreateTopic | DeleteTopic | EpochTick = CreateTopic(topic, 2, {}, TS)
            if topic not in view.topics:
                created.append((topic, offset))
        elif kind == "delete":
            entry = DeleteTopic(topic, TS)
        else:
            entry = EpochTick(TS)
        view = fold_controller(view, offset, entry)
        views.append(view)
    judged = views[min(cut, len(views) - 1)]
    present = set(created) | set(strangers)
    dead = set(dead_incarnations(present, judged))
    live = {(t.name, t.revision) for t in judged.topics.values()}
    assert not dead & live
    assert all(revision <= judged.offset for _, revision in dead)
    deleted_by_then = {(t, r) for t, r in created if r <= judged.offset and (t, r) not in live}
    assert deleted_by_then <= dead
