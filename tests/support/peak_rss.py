"""Test-only: the peak resident memory a call adds (Linux: the peak is
reset through ``/proc/self/clear_refs`` first).

``peak_rss_growth`` measures in this process; ``peak_rss_growth_in_child``
runs the call in a fresh spawned process, so what earlier tests left in
this process's allocator pools (a pytest worker's heap after the rest of
the suite) cannot move the figure, as a real Spark task's Python worker
starts without that history either."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def _measure(call: Callable[[], T]) -> tuple[T, int] | str:
    """``call()``'s result and how far the resident set rose above where it
    was before the call, in bytes; or why the peak cannot be measured."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")  # reset VmHWM to the current resident set
    except OSError as err:
        return f"cannot reset the peak RSS here: {err}"
    before = _status_kib("VmRSS")
    result = call()
    return result, (_status_kib("VmHWM") - before) * 1024


def _measured(outcome: tuple[T, int] | str) -> tuple[T, int]:
    if isinstance(outcome, str):
        pytest.skip(outcome)
    return outcome


def peak_rss_growth(call: Callable[[], T]) -> tuple[T, int]:
    """``call()``'s result and how far the resident set rose above where it
    was before the call, in bytes."""
    return _measured(_measure(call))


def _measure_in_child(
    warm_up: Callable[[], object] | None, call: Callable[[], Any]
) -> tuple[Any, int] | str:
    if warm_up is not None:
        warm_up()
    return _measure(call)


def peak_rss_growth_in_child(
    call: Callable[[], T], warm_up: Callable[[], object] | None = None
) -> tuple[T, int]:
    """``call()`` run in a fresh spawned process: its result and how far
    that process's resident set rose during it, in bytes. ``warm_up``, if
    given, runs first in the same process, unmeasured: a small call that
    pays what any first call pays once (lazy imports, the S3 client's
    service model) without leaving large freed pools behind that the
    measured call would then reuse unseen. Both must pickle (module-level
    functions, or ``functools.partial`` of them)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return _measured(pool.apply(_measure_in_child, (warm_up, call)))
