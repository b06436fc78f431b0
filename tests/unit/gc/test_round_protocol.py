"""The round protocol's guarded passes run in the one order every engine
must keep: the pause read before the first deleting pass and again after
the count, the guard's verdict between them, and a dry run that reads no
pause. Driven with a recording engine over the in-memory bucket, where the
pause is the real control document."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from epochgc.errors import CollectorPausedError
from epochgc.gc.control import pause
from epochgc.gc.pause import PauseGuard
from epochgc.gc.round_protocol import PassesOutcome, run_guarded_passes
from epochgc.simulate.memory_store import MemoryStore

ROOT = "epochgc"
NOW = datetime(2026, 11, 29, tzinfo=UTC)


class RecordingPasses:
    """An engine whose passes say what they saw (``listed``, ``eligible``)
    and record that they ran; ``during_count`` runs in the middle of the
    counting pass (an operator pausing, say)."""

    def __init__(
        self, listed: int, eligible: int, during_count: Callable[[], object] = lambda: None
    ) -> None:
        self.calls: list[str] = []
        self._seen = (listed, eligible)
        self._during_count = during_count

    def count(self) -> tuple[int, int]:
        self.calls.append("count")
        self._during_count()
        return self._seen

    def delete(self, counted: tuple[int, int] | None) -> tuple[int, int]:
        self.calls.append("delete" if counted is None else "delete after count")
        return self._seen

    def plan(self) -> tuple[int, int]:
        self.calls.append("plan")
        return self._seen

    def listed_and_eligible(self, result: tuple[int, int]) -> tuple[int, int]:
        return result


def run(
    store: MemoryStore,
    passes: RecordingPasses,
    *,
    dry_run: bool = False,
    guarded: bool = True,
    pause_read: bool = False,
) -> PassesOutcome[tuple[int, int]]:
    return run_guarded_passes(
        passes,
        PauseGuard(store, ROOT),
        dry_run=dry_run,
        guarded=guarded,
        max_delete_fraction=0.5,
        command="epochgc gc collect",
        pause_read=pause_read,
    )


def operator_pauses(store: MemoryStore) -> Callable[[], object]:
    return lambda: pause(store, ROOT, by="alice", reason="incident", now=NOW)


def test_a_guarded_round_counts_then_deletes_within_the_share() -> None:
    passes = RecordingPasses(listed=100, eligible=50)
    outcome = run(MemoryStore(), passes)
    assert passes.calls == ["count", "delete after count"]
    assert outcome.stopped_by_guard is None and outcome.counted == outcome.done == (100, 50)


def test_the_guard_stops_a_round_over_the_share_before_anything_is_deleted() -> None:
    passes = RecordingPasses(listed=100, eligible=51)
    outcome = run(MemoryStore(), passes)
    assert passes.calls == ["count"]
    assert outcome.done is None and outcome.counted == (100, 51)
    assert outcome.stopped_by_guard is not None
    assert "epochgc gc collect --force" in outcome.stopped_by_guard


def test_a_pause_that_lands_during_the_count_stops_the_round_before_deleting() -> None:
    store = MemoryStore()
    passes = RecordingPasses(listed=100, eligible=10, during_count=operator_pauses(store))
    with pytest.raises(CollectorPausedError, match="paused by alice: incident"):
        run(store, passes)
    assert passes.calls == ["count"]


@pytest.mark.parametrize("guarded", [True, False])
def test_a_paused_collector_runs_no_pass(guarded: bool) -> None:
    store = MemoryStore()
    operator_pauses(store)()
    passes = RecordingPasses(listed=100, eligible=10)
    with pytest.raises(CollectorPausedError):
        run(store, passes, guarded=guarded)
    assert passes.calls == []


def test_an_engine_that_read_the_pause_when_it_opened_is_not_read_again_before_its_first_pass() -> (
    None
):
    store = MemoryStore()
    operator_pauses(store)()  # after the engine's own read: its tasks stop mid-job
    passes = RecordingPasses(listed=100, eligible=10)
    outcome = run(store, passes, guarded=False, pause_read=True)
    assert passes.calls == ["delete"] and outcome.done == (100, 10)


def test_a_dry_run_reads_no_pause_and_reports_the_guards_verdict() -> None:
    store = MemoryStore()
    operator_pauses(store)()
    passes = RecordingPasses(listed=100, eligible=80)
    outcome = run(store, passes, dry_run=True)
    assert passes.calls == ["plan"]
    assert outcome.done == (100, 80) and outcome.stopped_by_guard is not None
    unguarded = run(store, RecordingPasses(listed=100, eligible=80), dry_run=True, guarded=False)
    assert unguarded.stopped_by_guard is None
