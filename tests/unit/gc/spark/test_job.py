"""The Spark driver's pure decisions: which ``M`` it may use, how shards are
dealt into tasks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.errors import InvalidArgumentError
from epochgc.gc.spark.job import choose_safe_epoch, one_line_cause, shard_groups


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
