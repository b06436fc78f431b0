"""Two operators acting on one topic name at the same moment (issue: a
retried ``delete_topic`` deleted the incarnation another operator had just
created, and both writers believed the same slot was theirs).

Each test interleaves the writers deterministically: a hook runs the other
operator's command between one writer's read of the controller and its
append (``HookedStore.before_create``, before the PUT is sent), or in the
back-off after that writer lost its slot (the log's ``sleep``). Everything
else is the real controller against the embedded S3."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from epochgc.errors import TopicExistsError, TopicNotFoundError
from epochgc.runtime import Runtime
from epochgc.storage.keys import controller_log_prefix
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.controller_codec import DeleteTopic, decode_controller_entry
from tests.support.faults import HookedStore

ROOT = "epochgc"
SAME_SECOND = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)


def on_controller_puts(store: S3ObjectStore, *hooks: Callable[[], None]) -> HookedStore:
    """A store whose n-th create-only PUT to the controller log first runs
    ``hooks[n]`` (the other operator acting while this one's request is on
    its way); later PUTs run nothing."""
    pending = list(hooks)
    prefix = controller_log_prefix(ROOT)

    def before_create(key: str, _body: bytes) -> None:
        if key.startswith(prefix) and pending:
            pending.pop(0)()

    return HookedStore(store, before_create=before_create)


def entry_at(store: S3ObjectStore, offset: int) -> object:
    controller = Controller(store, ROOT)
    return decode_controller_entry(store.get(controller.log.key_of(offset)).body)


def test_a_late_delete_never_deletes_the_incarnation_created_after_its_read(
    store: S3ObjectStore,
) -> None:
    """The reported data loss: Y reads orders@1; X deletes it in the slot Y
    chose; X creates orders@3 while Y backs off; Y's retried delete must
    not delete orders@3, and Y must say that its own entry did nothing."""
    Controller(store, ROOT).create_topic("orders", 1)  # orders@1
    x = Controller(store, ROOT, runtime=Runtime(wall=lambda: SAME_SECOND.replace(minute=1)))
    created: list[int] = []
    y_store = on_controller_puts(
        store,
        lambda: x.delete_topic("orders"),  # takes slot 2, the one Y chose
        lambda: created.append(x.create_topic("orders", 1).revision),  # slot 3
    )
    y = Controller(y_store, ROOT, runtime=Runtime(wall=lambda: SAME_SECOND))

    outcome = y.delete_topic("orders")

    assert created == [3]
    view = Controller(store, ROOT).snapshot()
    assert "orders" in view.topics, "orders@3 was deleted by a delete that meant orders@1"
    assert view.topics["orders"].revision == 3
    assert ("orders", 3) not in view.deleted
    assert view.deleted[("orders", 1)].deleted_at == 2
    assert not outcome.by_this_writer, "Y reported X's deletion as its own"
    assert outcome.revision == 1
    assert outcome.deleted_at == 2
    assert outcome.entry_offset == 4
    mine = entry_at(store, 4)
    assert isinstance(mine, DeleteTopic)
    assert mine.revision == 1, "the entry names the incarnation it meant"


def test_two_deletes_in_the_same_second_are_told_apart(store: S3ObjectStore) -> None:
    """Entries written in one second by two writers used to be
    byte-identical, so the loser read the winner's entry as its own."""
    Controller(store, ROOT).create_topic("orders", 1)
    x = Controller(store, ROOT, runtime=Runtime(wall=lambda: SAME_SECOND))
    outcomes = []
    y_store = on_controller_puts(store, lambda: outcomes.append(x.delete_topic("orders")))
    y = Controller(y_store, ROOT, runtime=Runtime(wall=lambda: SAME_SECOND))

    outcomes.append(y.delete_topic("orders"))

    x_outcome, y_outcome = outcomes
    assert x_outcome.by_this_writer
    assert x_outcome.entry_offset == x_outcome.deleted_at == 2
    assert not y_outcome.by_this_writer
    assert y_outcome.entry_offset == 3, "Y's own entry went to the next slot"
    assert y_outcome.deleted_at == 2
    assert store.get(x.log.key_of(2)).body != store.get(x.log.key_of(3)).body


def test_a_delete_names_the_revision_it_read(store: S3ObjectStore) -> None:
    controller = Controller(store, ROOT)
    info = controller.create_topic("orders", 1)
    outcome = controller.delete_topic("orders")
    assert outcome.by_this_writer
    assert (outcome.topic, outcome.revision, outcome.deleted_at) == ("orders", info.revision, 2)
    entry = entry_at(store, 2)
    assert isinstance(entry, DeleteTopic)
    assert entry.revision == info.revision


def test_a_delete_of_a_named_revision_that_is_not_live_changes_nothing(
    store: S3ObjectStore,
) -> None:
    controller = Controller(store, ROOT)
    controller.create_topic("orders", 1)
    controller.delete_topic("orders")
    live = controller.create_topic("orders", 1)
    with pytest.raises(TopicNotFoundError, match=r"orders@1 is not live \(orders@3 is\)"):
        controller.delete_topic("orders", revision=1)
    assert controller.snapshot().topics["orders"].revision == live.revision


def test_a_concurrent_create_reports_the_winners_revision(store: S3ObjectStore) -> None:
    x = Controller(store, ROOT)
    y_store = on_controller_puts(store, lambda: x.create_topic("orders", 2) and None)
    y = Controller(y_store, ROOT)
    with pytest.raises(TopicExistsError, match=r"created at revision 1 by another writer"):
        y.create_topic("orders", 1)
    assert Controller(store, ROOT).topic("orders").partitions == 2
