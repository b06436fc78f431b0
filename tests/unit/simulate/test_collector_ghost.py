"""The simulation's ghost of the collector: a deletion that reaches the
bucket while paused, and a deletion record that is not exact, are
violations; the one request a pause cannot stop, and keys whose answer
was lost, are not."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from epochgc.gc.control import ControlDocument, encode_control
from epochgc.gc.deletion_record import DeletionRecord
from epochgc.gc.run_report import RunSummary
from epochgc.simulate.cluster import Violation
from epochgc.simulate.collector_ghost import COLLECTOR, CollectorGhost
from epochgc.simulate.memory_store import MemoryStore
from epochgc.storage.keys import encode_l0_key, gc_control_key, gc_run_deleted_key
from epochgc.storage.object_store import ObjectInfo

ROOT = "epochgc"
CONTROL = gc_control_key(ROOT)
RUN = "20260101T000010Z-0000abcd"
KEYS = [encode_l0_key(ROOT, 0, 3, f"00000000-0000-4000-8000-00000000000{n}") for n in range(4)]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def paused(flag: bool) -> bytes:
    return encode_control(
        ControlDocument(paused=flag, reason="look" if flag else "", updated_by="op")
    )


def ghost(bucket: MemoryStore | None = None) -> CollectorGhost:
    return CollectorGhost(ROOT, bucket or MemoryStore(), Violation)


def test_a_deletion_after_a_read_that_found_it_running_may_land_after_the_pause() -> None:
    g = ghost()
    g.request_landing(COLLECTOR, "deleter-1", "GetObject", CONTROL)
    g.control_landed(paused(True), 5.0)
    g.request_landing(COLLECTOR, "deleter-1", "DeleteObjects", KEYS[0])  # in flight: allowed


@pytest.mark.parametrize(
    ("before", "why"),
    [
        (None, "nothing"),
        ("DeleteObjects", "a DeleteObjects"),
        ("ListObjectsV2", "a ListObjectsV2"),
    ],
)
def test_a_deletion_landing_while_paused_without_its_own_read_is_a_violation(
    before: str | None, why: str
) -> None:
    g = ghost()
    if before is not None:
        g.request_landing(COLLECTOR, "deleter-1", "GetObject", CONTROL)
        g.request_landing(COLLECTOR, "deleter-1", before, KEYS[1])
    g.control_landed(paused(True), 5.0)
    with pytest.raises(Violation, match=f"deleted while paused.*previous request was {why}"):
        g.request_landing(COLLECTOR, "deleter-1", "DeleteObjects", KEYS[0])


def test_a_read_that_found_it_paused_does_not_license_a_deletion() -> None:
    g = ghost()
    g.control_landed(paused(True), 5.0)
    g.request_landing(COLLECTOR, "deleter-1", "GetObject", CONTROL)
    with pytest.raises(Violation, match="found it paused"):
        g.request_landing(COLLECTOR, "deleter-1", "DeleteObjects", KEYS[0])


def test_after_resume_and_for_other_processes_nothing_is_judged() -> None:
    g = ghost()
    g.control_landed(paused(True), 5.0)
    g.request_landing("node-1#1", "truncate", "DeleteObjects", KEYS[0])  # not the collector's
    g.control_landed(paused(False), 9.0)
    g.request_landing(COLLECTOR, "deleter-1", "DeleteObjects", KEYS[0])
    assert (g.paused_since, g.pauses) == (None, 1)


def summary(*, success: bool = True, cause: str | None = None) -> RunSummary:
    return RunSummary(
        run_id=RUN,
        engine="local",
        dry_run=False,
        safe_epoch=3,
        controller_offset=1,
        started_at=T0,
        finished_at=T0,
        success=success,
        listed=4,
        eligible=4,
        deleted=2,
        bytes_deleted=2,
        skipped={},
        errors=0 if success else 1,
        cause=cause,
    )


def record(bucket: MemoryStore, keys: list[str]) -> None:
    with DeletionRecord(ROOT, 3) as rows:
        rows.add([ObjectInfo(k, 1, "e", T0) for k in keys])
        rows.upload(bucket, gc_run_deleted_key(ROOT, RUN, 0))


def test_a_record_of_exactly_what_was_deleted_passes() -> None:
    bucket = MemoryStore()
    g = ghost(bucket)
    g.round_starts(COLLECTOR)
    g.deleted((KEYS[0], KEYS[1]), COLLECTOR)
    g.deleted((KEYS[2],), "node-1#1")  # another process's deletion is not the run's
    record(bucket, KEYS[:2])
    g.check_record(COLLECTOR, summary())


def test_a_recorded_key_no_deletion_confirmed_is_a_violation() -> None:
    bucket = MemoryStore()
    g = ghost(bucket)
    g.round_starts(COLLECTOR)
    g.deleted((KEYS[0],), COLLECTOR)
    record(bucket, KEYS[:2])  # KEYS[1] failed with a per-key error, say
    with pytest.raises(Violation, match="none of its deletions confirmed"):
        g.check_record(COLLECTOR, summary())


def test_an_answered_deletion_missing_from_the_record_is_a_violation() -> None:
    bucket = MemoryStore()
    g = ghost(bucket)
    g.round_starts(COLLECTOR)
    g.deleted((KEYS[0], KEYS[1]), COLLECTOR)
    record(bucket, KEYS[:1])
    with pytest.raises(Violation, match="did not record them"):
        g.check_record(COLLECTOR, summary(success=False))


def test_an_unanswered_deletion_may_be_missing_only_from_a_run_that_says_it_failed() -> None:
    bucket = MemoryStore()
    g = ghost(bucket)
    g.round_starts(COLLECTOR)
    g.deleted((KEYS[0], KEYS[1]), COLLECTOR)
    g.answer_lost(COLLECTOR, (KEYS[1],))
    record(bucket, KEYS[:1])
    g.check_record(COLLECTOR, summary(success=False))
    with pytest.raises(Violation, match="says it succeeded"):
        g.check_record(COLLECTOR, summary(success=True))


def test_a_record_that_could_not_be_written_is_excused_when_the_summary_says_so() -> None:
    g = ghost()
    g.round_starts(COLLECTOR)
    g.deleted((KEYS[0],), COLLECTOR)
    g.check_record(COLLECTOR, summary(success=False, cause="deletion record not written: 503"))
    with pytest.raises(Violation, match="did not record them"):
        g.check_record(COLLECTOR, summary(success=False, cause="something else"))


def test_each_round_is_judged_on_its_own_deletions() -> None:
    bucket = MemoryStore()
    g = ghost(bucket)
    g.round_starts(COLLECTOR)
    g.deleted((KEYS[0],), COLLECTOR)
    g.round_starts(COLLECTOR)
    g.check_record(COLLECTOR, summary())  # the first round's key is not this round's


SECOND = f"{COLLECTOR}-2"


def test_two_collectors_rounds_are_judged_apart() -> None:
    """Each collector's record is held to its own deletions: a key the
    other one deleted is neither owed to this record nor allowed in it,
    and one collector's new round forgets nothing of the other's."""
    bucket = MemoryStore()
    g = ghost(bucket)
    g.round_starts(COLLECTOR)
    g.round_starts(SECOND)
    g.deleted((KEYS[0],), COLLECTOR)
    g.deleted((KEYS[1],), SECOND)
    g.round_starts(SECOND)  # the second's next round
    record(bucket, KEYS[:1])
    g.check_record(COLLECTOR, summary())
    with pytest.raises(Violation, match="none of its deletions confirmed"):
        g.check_record(SECOND, summary())


def test_a_second_collectors_deletion_while_paused_is_judged_on_its_own_reads() -> None:
    g = ghost()
    g.request_landing(COLLECTOR, "deleter-1", "GetObject", CONTROL)
    g.round_starts(SECOND)  # forgets only the second's tasks
    g.control_landed(paused(True), 5.0)
    g.request_landing(COLLECTOR, "deleter-1", "DeleteObjects", KEYS[0])  # in flight: allowed
    with pytest.raises(Violation, match=f"{SECOND}'s DeleteObjects.*previous request was nothing"):
        g.request_landing(SECOND, "deleter-1", "DeleteObjects", KEYS[1])
