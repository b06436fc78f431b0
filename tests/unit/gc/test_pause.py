"""The pause guard (``gc.pause``): one decision, read from the control
document right before a deleting pass and before every delete request of
a guarded store; what it held, for ``gc status``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.errors import CollectorPausedError, MalformedRecordError
from epochgc.events import EventChannel
from epochgc.gc.control import DeletingJob, HeldJob, pause, resume
from epochgc.gc.pause import GuardedStore, HeldJobsChanged, PauseGuard
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import gc_control_key
from tests.support.clocks import SetClock

ROOT = "epochgc"
T0 = datetime(2026, 11, 24, 5, 0, 0, tzinfo=UTC)


def keys(n: int) -> list[str]:
    return [f"{ROOT}/x/{i:05d}" for i in range(n)]


def filled(n: int = 3) -> MemoryStore:
    store = MemoryStore()
    for key in keys(n):
        store.put(key, b"x")
    return store


def test_running_lets_every_job_delete_and_holds_nothing() -> None:
    store = filled()
    guard = PauseGuard(store, ROOT)
    for job in DeletingJob:
        guard.check(job)
    GuardedStore(store, guard, DeletingJob.TIDYING).delete(keys(3)[0])
    assert guard.held() == ()
    assert len(list(store.list_objects(f"{ROOT}/x/"))) == 2


def test_a_pause_holds_each_job_from_its_first_refusal_until_resume() -> None:
    store = MemoryStore()
    clock = SetClock(T0)
    changes: list[tuple[HeldJob, ...]] = []
    events = EventChannel()
    events.subscribe(HeldJobsChanged, lambda e: changes.append(e.held))
    guard = PauseGuard(store, ROOT, now=clock, events=events)
    pause(store, ROOT, by="alice", reason="look first", now=T0)
    with pytest.raises(CollectorPausedError, match=r"^paused by alice: look first$"):
        guard.check(DeletingJob.CONTROLLER_TRUNCATION)
    clock.at = T0 + timedelta(minutes=5)
    with pytest.raises(CollectorPausedError):
        guard.check(DeletingJob.CONTROLLER_TRUNCATION)
    guard.hold(DeletingJob.L0)
    assert guard.held() == (
        HeldJob(DeletingJob.L0, T0 + timedelta(minutes=5)),
        HeldJob(DeletingJob.CONTROLLER_TRUNCATION, T0),
    ), "in job order; the first refusal's time is kept"
    assert len(changes) == 2, "only a change of the held set is announced"

    resume(store, ROOT, by="alice", now=T0)
    guard.check(DeletingJob.CONTROLLER_TRUNCATION)
    assert guard.held() == (HeldJob(DeletingJob.L0, T0 + timedelta(minutes=5)),)
    assert guard.release_all() == (HeldJob(DeletingJob.L0, T0 + timedelta(minutes=5)),)
    assert guard.held() == () and len(changes) == 4


@pytest.mark.parametrize("how", ["delete", "delete_batch", "delete_many"])
def test_a_guarded_store_sends_no_delete_while_paused_and_reads_as_usual(how: str) -> None:
    store = filled()
    guard = PauseGuard(store, ROOT)
    guarded = GuardedStore(store, guard, DeletingJob.JANITOR)
    pause(store, ROOT, by="bob", reason="incident", now=T0)
    store.reset_counts()
    with pytest.raises(CollectorPausedError, match=r"^paused by bob: incident$"):
        if how == "delete":
            guarded.delete(keys(3)[0])
        else:
            getattr(guarded, how)(keys(3))
    assert store.count("DeleteObject") + store.count("DeleteObjects") == 0
    assert [o.key for o in guarded.list_objects(f"{ROOT}/x/")] == keys(3)
    assert guarded.get(keys(3)[0]).body == b"x"
    guarded.put(f"{ROOT}/y", b"writes are not deletions")
    assert [h.job for h in guard.held()] == [DeletingJob.JANITOR]


def test_a_pause_landing_mid_pass_stops_it_before_its_next_request() -> None:
    """delete_many goes out as batches of 1000, the pause read before each:
    paused after the first, the other two are never sent."""
    store = filled(2500)
    guard = PauseGuard(store, ROOT)

    class PausingAfterFirstBatch(GuardedStore):
        def delete_batch(self, batch: list[str]) -> object:  # type: ignore[override]
            outcome = super().delete_batch(batch)
            pause(store, ROOT, by="carol", reason="mid-pass", now=T0)
            return outcome

    store.reset_counts()
    with pytest.raises(CollectorPausedError):
        PausingAfterFirstBatch(store, guard, DeletingJob.JANITOR).delete_many(keys(2500))
    assert store.count("DeleteObjects") == 1
    assert len(list(store.list_objects(f"{ROOT}/x/"))) == 1500
    # One guard read per request sent or refused, plus the pause's own read.
    assert store.count("GetObject", gc_control_key(ROOT)) == 2 + 1


def test_an_unreadable_control_document_stops_deleting_without_holding() -> None:
    store = filled()
    store.put(gc_control_key(ROOT), b"{not json")
    guard = PauseGuard(store, ROOT)
    with pytest.raises(MalformedRecordError):
        GuardedStore(store, guard, DeletingJob.TIDYING).delete_many(keys(3))
    assert len(list(store.list_objects(f"{ROOT}/x/"))) == 3
    assert guard.held() == ()


_steps = st.lists(
    st.one_of(
        st.sampled_from(["pause", "resume", "release_all"]),
        st.tuples(st.sampled_from(DeletingJob), st.integers(1, 3)),
    ),
    max_size=25,
)


@settings(max_examples=60)
@given(steps=_steps)
def test_deletes_happen_only_while_running_and_held_means_refused_since(
    steps: list[object],
) -> None:
    """Model: a job is held iff it was refused and has not passed or been
    released since; a delete request reaches the store only while running."""
    store = filled(50)
    guard = PauseGuard(store, ROOT)
    paused = False
    held: set[DeletingJob] = set()
    expected_left = 50
    for step in steps:
        if step == "pause":
            pause(store, ROOT, by="p", reason="r", now=T0)
            paused = True
        elif step == "resume":
            resume(store, ROOT, by="p", now=T0)
            paused = False
        elif step == "release_all":
            guard.release_all()
            held.clear()
        else:
            assert isinstance(step, tuple)
            job, n = step
            left = sorted(o.key for o in store.list_objects(f"{ROOT}/x/"))
            try:
                GuardedStore(store, guard, job).delete_many(left[:n])
            except CollectorPausedError:
                assert paused
                held.add(job)
            else:
                assert not paused
                held.discard(job)
                expected_left -= len(left[:n])
        assert {h.job for h in guard.held()} == held
        assert len(list(store.list_objects(f"{ROOT}/x/"))) == expected_left
