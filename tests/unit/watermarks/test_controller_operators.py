"""Two operators deleting and creating one topic name at once, as a
hypothesis state machine over the real ``Controller`` (in memory, S3's
create-only semantics).

While one operator's command is on its way, the other acts: each
create-only PUT of the first to the controller log first runs the other's
next queued command, so the other's entries land between the first's read
and its append, and again in every back-off after the first loses a slot.
Whatever the interleaving: an incarnation ends only at a ``delete_topic``
that names it, and each operator's report of what its own entry did is
what the log says."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from epochgc.errors import TopicExistsError, TopicNotFoundError
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import controller_log_prefix
from epochgc.watermarks.controller import Controller, ControllerView, fold_controller
from epochgc.watermarks.controller_codec import CreateTopic, DeleteTopic, decode_controller_entry
from tests.support.faults import HookedStore

ROOT = "epochgc"
NAME = "orders"
ACTIONS = st.lists(st.sampled_from(["delete", "create", "tick"]), max_size=3)


class TwoOperators(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        self.prefix = controller_log_prefix(ROOT)
        self.queued: list[Callable[[], None]] = []
        hooked = HookedStore(self.store, before_create=self._run_queued)
        self.acting = Controller(hooked, ROOT)  # type: ignore[arg-type]
        self.other = Controller(self.store, ROOT)  # type: ignore[arg-type]

    def _run_queued(self, key: str, _body: bytes) -> None:
        if key.startswith(self.prefix) and self.queued:
            self.queued.pop(0)()

    def _queue(self, actions: list[str]) -> None:
        def act(action: str) -> Callable[[], None]:
            def run() -> None:
                with contextlib.suppress(TopicExistsError, TopicNotFoundError):
                    if action == "delete":
                        self.other.delete_topic(NAME)
                    elif action == "create":
                        self.other.create_topic(NAME, 1)
                    else:
                        self.other.tick()

            return run

        self.queued = [act(a) for a in actions]

    def _entries(self) -> list[object]:
        tail = self.other.current_epoch()
        return [
            decode_controller_entry(self.store.get(self.other.log.key_of(offset)).body)
            for offset in range(1, tail + 1)
        ]

    @rule(meanwhile=ACTIONS)
    def delete(self, meanwhile: list[str]) -> None:
        live = self.acting.snapshot().topics.get(NAME)
        self._queue(meanwhile)
        try:
            outcome = self.acting.delete_topic(NAME)
        except TopicNotFoundError:
            assert live is None, "the name was live when the command read it"
            return
        assert live is not None and outcome.revision == live.revision, "deleted what it read"
        mine = decode_controller_entry(
            self.store.get(self.other.log.key_of(outcome.entry_offset)).body
        )
        assert isinstance(mine, DeleteTopic) and mine.revision == outcome.revision
        ended_by = decode_controller_entry(
            self.store.get(self.other.log.key_of(outcome.deleted_at)).body
        )
        assert isinstance(ended_by, DeleteTopic) and ended_by.revision == outcome.revision
        assert outcome.by_this_writer == (ended_by.nonce == mine.nonce)

    @rule(meanwhile=ACTIONS)
    def create(self, meanwhile: list[str]) -> None:
        self._queue(meanwhile)
        try:
            info = self.acting.create_topic(NAME, 2)
        except TopicExistsError:
            return
        entry = decode_controller_entry(self.store.get(self.other.log.key_of(info.revision)).body)
        assert isinstance(entry, CreateTopic) and entry.partitions == 2, "reported another's create"

    @rule()
    def other_deletes(self) -> None:
        with contextlib.suppress(TopicNotFoundError):
            self.other.delete_topic(NAME)

    @rule()
    def other_creates(self) -> None:
        with contextlib.suppress(TopicExistsError):
            self.other.create_topic(NAME, 1)

    @invariant()
    def every_incarnation_ended_by_a_delete_that_named_it(self) -> None:
        view = ControllerView.empty()
        for offset, entry in enumerate(self._entries(), start=1):
            view = fold_controller(view, offset, entry)  # type: ignore[arg-type]
        for (name, revision), gone in view.deleted.items():
            ended_by = decode_controller_entry(
                self.store.get(self.other.log.key_of(gone.deleted_at)).body
            )
            assert isinstance(ended_by, DeleteTopic)
            assert (ended_by.topic, ended_by.revision) == (name, revision)
        assert view == Controller(self.store, ROOT).snapshot()  # type: ignore[arg-type]


TwoOperators.TestCase.settings = settings(max_examples=200, stateful_step_count=8)
test_two_operators = TwoOperators.TestCase
