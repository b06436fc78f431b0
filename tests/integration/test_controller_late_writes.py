"""Controller views against the truth under compaction, partial
truncation and late writes, on the embedded S3 (hypothesis stateful).

A late write is a create-only PUT whose slot was chosen earlier (a paused
process, a slow request, a writer's stale tail) and that lands in a slot
a compaction has freed. The model keeps the log's own entries (those
appended at the tail) and folds them with the pure ``fold_controller``;
every reader's view must equal that fold at the view's offset, whatever
the interleaving: seed 16 of the soak had a reader that folded a late
tick in place of a ``delete_topic`` and kept a deleted incarnation live.
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from epochgc.errors import EpochGCError
from epochgc.storage.cas_log import ConditionalAppendLog
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import controller_log_prefix
from epochgc.storage.s3 import S3ObjectStore
from epochgc.verify.faults import FaultPlan, FaultyStore
from epochgc.watermarks.controller import (
    CONTROLLER_FIRST_OFFSET,
    Controller,
    ControllerView,
    fold_controller,
)
from epochgc.watermarks.controller_codec import (
    CreateTopic,
    DeleteTopic,
    EpochTick,
    decode_controller_entry,
    encode_controller_entry,
)
from tests.conftest import FAST_RETRIES

ROOT = "epochgc"
TOPIC = "churn"
T0 = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)

LATE_KINDS = ("tick", "create", "delete")


class LateWrites(RuleBasedStateMachine):
    def __init__(self, server: EmbeddedS3) -> None:
        super().__init__()
        bucket = f"t-{uuid.uuid4().hex[:16]}"
        server.create_bucket(bucket)
        self.store = S3ObjectStore(
            make_s3_client(server.client_settings()), bucket, retry_policy=FAST_RETRIES
        )
        self.writer = Controller(self.store, ROOT)
        self.reader = Controller(self.store, ROOT)
        self.truth: dict[int, bytes] = {}
        """The log's own entries by offset (appended at the tail)."""
        self.late: list[tuple[int, bytes]] = []
        self.clock = 0

    def _now(self) -> datetime:
        self.clock += 1
        return T0 + timedelta(seconds=self.clock)

    def _tail(self) -> int:
        return max(self.truth, default=CONTROLLER_FIRST_OFFSET - 1)

    def _expected(self, offset: int) -> ControllerView:
        view = ControllerView.empty()
        for at in sorted(o for o in self.truth if o <= offset):
            view = fold_controller(view, at, decode_controller_entry(self.truth[at], "truth"))
        return view

    def _record(self, offset: int, payload: bytes) -> None:
        assert offset == self._tail() + 1, f"an append at {offset} is not at the tail"
        self.truth[offset] = payload

    def _live(self) -> bool:
        return TOPIC in self._expected(self._tail()).topics

    @initialize(seed=st.integers(0, 2**16))
    def faults(self, seed: int) -> None:
        plan = FaultPlan(
            error=0.0, slowdown=0.0, unknown_outcome=0.0, latency=0.0, partial_delete=0.3
        )
        self.compactor = Controller(FaultyStore(self.store, plan, seed), ROOT)  # type: ignore[arg-type]

    @rule()
    def create(self) -> None:
        if self._live():
            return
        info = self.writer.create_topic(TOPIC, 1)
        entry = self.store.get(self.writer.log.key_of(info.revision)).body
        self._record(info.revision, entry)

    @rule()
    def delete(self) -> None:
        if not self._live():
            return
        offset = self.writer.delete_topic(TOPIC).entry_offset
        self._record(offset, self.store.get(self.writer.log.key_of(offset)).body)

    @rule()
    def tick(self) -> None:
        offset = self.writer.tick()
        self._record(offset, self.store.get(self.writer.log.key_of(offset)).body)

    @rule()
    def compact(self) -> None:
        with contextlib.suppress(EpochGCError):  # a partial truncation: the next finishes it
            self.compactor.compact(min_entries=1)

    @rule(kind=st.sampled_from(LATE_KINDS))
    def choose_late_slot(self, kind: str) -> None:
        """A writer that read the log now (its view is the reader's) and
        will send its append later."""
        self.poll()
        entry = {
            "tick": EpochTick(self._now()),
            "create": CreateTopic(TOPIC, 1, {}, self._now()),
            "delete": DeleteTopic(TOPIC, self._now()),
        }[kind]
        self.late.append((self._tail() + 1, encode_controller_entry(entry)))

    @rule()
    def send_late(self) -> None:
        if not self.late:
            return
        slot, payload = self.late.pop(0)
        log = ConditionalAppendLog(self.store, controller_log_prefix(ROOT), first_offset=1)
        if log.append_at(slot, payload) and slot == self._tail() + 1:
            self._record(slot, payload)  # nobody appended meanwhile: a plain append

    @rule(
        kind=st.sampled_from(LATE_KINDS),
        meanwhile=st.lists(st.sampled_from(("tick", "toggle")), min_size=2, max_size=4),
    )
    def late_write_race(self, kind: str, meanwhile: list[str]) -> None:
        """The race in one step: a slot chosen, two or more appends and a
        compaction (truncating the slot, unless partially) before the PUT,
        then the reader reads on from just below it."""
        self.choose_late_slot(kind)
        for step in meanwhile:
            if step == "tick":
                self.tick()
            elif self._live():
                self.delete()
            else:
                self.create()
        self.compact()
        self.send_late()
        self.poll()

    @rule()
    def poll(self) -> None:
        view = self.reader.snapshot()
        expected = self._expected(view.offset)
        assert (view.topics, view.deleted) == (expected.topics, expected.deleted), (
            f"a long-lived reader at {view.offset}"
        )

    @invariant()
    def a_fresh_reader_agrees(self) -> None:
        view = Controller(self.store, ROOT).snapshot()
        assert view.offset == self._tail()
        expected = self._expected(view.offset)
        assert (view.topics, view.deleted) == (expected.topics, expected.deleted)


def test_views_equal_the_fold_of_the_logs_own_entries(s3_server: EmbeddedS3) -> None:
    run_state_machine_as_test(
        lambda: LateWrites(s3_server),
        settings=settings(
            max_examples=12,
            derandomize=True,
            stateful_step_count=10,
            # Every step is requests to a server: no shrinking (the failing
            # steps are printed as found, each a few lines).
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
