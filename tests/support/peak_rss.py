"""Test-only: the peak resident memory of this process while a call runs
(Linux: the peak is reset through ``/proc/self/clear_refs`` first)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def peak_rss_growth(call: Callable[[], T]) -> tuple[T, int]:
    """``call()``'s result and how far the resident set rose above where it
    was before the call, in bytes."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")  # reset VmHWM to the current resident set
    except OSError as err:
        pytest.skip(f"cannot reset the peak RSS here: {err}")
    before = _status_kib("VmRSS")
    result = call()
    return result, (_status_kib("VmHWM") - before) * 1024
