"""The Spark driver's pure decisions: which ``M`` it may use, how shards are
dealt into tasks, what a run summary says of deletions in no record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import InvalidArgumentError
from epochgc.gc.run_report import RunSummary
from epochgc.gc.spark.job import choose_safe_epoch, one_line_cause, shard_groups, summarise
from epochgc.gc.spark.tasks import TaskResult


@given(
    computed=st.integers(0, 50),
    above=st.integers(0, 50),
    requested=st.none() | st.integers(-2, 120),
    allow_above_m=st.booleans(),
)
def test_m_is_never_above_the_offset_and_above_computed_only_when_allowed(
    computed: int, above: int, requested: int | None, allow_above_m: bool
) -> None:
    offset = computed + above
    try:
        chosen = choose_safe_epoch(computed, offset, requested, allow_above_m=allow_above_m)
    except InvalidArgumentError:
        assert requested is not None
        assert requested < 0 or requested > offset or (requested > computed and not allow_above_m)
        return
    assert 0 <= chosen <= offset
    assert chosen <= computed or allow_above_m
    assert chosen == (computed if requested is None else requested)


def test_the_refusal_names_the_flag_and_says_force_is_not_it() -> None:
    with pytest.raises(InvalidArgumentError, match="--allow-max-epoch-above-m") as refused:
        choose_safe_epoch(10, 11, 11, allow_above_m=False)
    assert "--force does not" in str(refused.value)


@given(st.lists(st.integers(0, 999), unique=True).map(sorted), st.integers(0, 2000))
def test_every_shard_found_is_in_exactly_one_group(shards: list[int], tasks: int) -> None:
    groups = shard_groups(shards, tasks)
    assert [s for g in groups for s in g] == shards
    assert all(groups) and len(groups) <= max(1, tasks or len(shards))


def test_the_cause_of_a_failed_job_is_the_workers_exception_line() -> None:
    text = (
        "An error occurred while calling o71.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage "
        "1.0 failed 1 times, most recent failure: Lost task 0.0 (TID 1): "
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/w/pyspark/worker.py", line 1, in main\n'
        "    func, profiler = read_command(pickleSer, infile)\n"
        "pyarrow.lib.ArrowMemoryError: malloc of size 67108864 failed\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(x.scala:1)\n"
    )
    assert one_line_cause(RuntimeError(text)) == "ArrowMemoryError: malloc of size 67108864 failed"
    crashed = (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Lost task 0.0: "
        "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)\n"
        "\tat org.apache.spark.api.python.BasePythonRunner(x.scala:1)\n"
    )
    assert one_line_cause(RuntimeError(crashed)).startswith("Job aborted due to stage failure")
    assert "Python worker exited unexpectedly" in one_line_cause(RuntimeError(crashed))
    assert one_line_cause(RuntimeError("no luck\nmore")) == "RuntimeError: no luck"
    assert "\n" not in one_line_cause(RuntimeError("x" * 1000))
    assert len(one_line_cause(RuntimeError("x" * 1000))) <= 400


def summary_of(
    results: list[TaskResult],
    lost: list[TaskResult],
    cause: str | None = None,
    *,
    records: bool = True,
) -> RunSummary:
    return summarise(
        results,
        lost=lost,
        records=records,
        run_id="20261129T000000Z-00000001",
        engine="spark-listing",
        safe_epoch=10,
        controller_offset=12,
        started_at=datetime(2026, 11, 29, tzinfo=UTC),
        dry_run=False,
        driver_requests={},
        stopped=False,
        cause=cause,
    )


def test_deletions_a_lost_attempt_left_out_of_the_record_fail_the_run_by_name() -> None:
    """A lost attempt's task record says 12,000 deleted, 10,000 in uploaded
    parts: the summary counts the 12,000 and names the 2,000, after the
    job's own cause; a finished attempt's refused part is named too."""
    finished = TaskResult(0, listed=3000, eligible=3000, deleted=3000, recorded=3000, finished=True)
    lost = TaskResult(1, deleted=12_000, recorded=10_000, cause="RuntimeError: boom")
    summary = summary_of([finished], [lost], cause="Job aborted due to stage failure")
    assert summary.deleted == 15_000 and not summary.success
    assert summary.cause == (
        "Job aborted due to stage failure; deletion record incomplete: 2000 deletions "
        "unrecorded (2000 of attempts that never returned)"
    )
    refused = TaskResult(2, deleted=5000, recorded=1000, errors=1, finished=True)
    both = summary_of([finished, refused], [lost])
    assert both.cause == (
        "deletion record incomplete: 6000 deletions unrecorded (2000 of attempts that never "
        "returned, 4000 of parts that could not be uploaded)"
    )


def test_a_lost_record_that_does_not_say_what_it_recorded_recorded_nothing() -> None:
    """A task record without ``recorded`` (an older executor, which
    uploaded its part only when it ended) is not taken as complete."""
    older = TaskResult(1, deleted=7, recorded=None, cause="RuntimeError: boom")
    assert summary_of([], [older]).cause == (
        "deletion record incomplete: 7 deletions unrecorded (7 of attempts that never returned)"
    )


def test_a_run_whose_record_misses_nothing_or_keeps_none_names_no_gap() -> None:
    whole = TaskResult(0, listed=9, eligible=9, deleted=9, recorded=9, finished=True)
    summary = summary_of([whole], [])
    assert summary.success and summary.cause is None and summary.deleted == 9
    off = TaskResult(0, listed=5, eligible=5, deleted=5, recorded=None, finished=True)
    lost_off = TaskResult(1, deleted=7, recorded=None)
    summary = summary_of([off], [lost_off], records=False)
    assert summary.success and summary.cause is None and summary.deleted == 12
