"""check.py's report of a run: what pan wrote, read back honestly."""

from __future__ import annotations

import check


def test_a_bitstate_line_says_partial_with_the_counts_pan_wrote() -> None:
    """pan writes 10**8 states and more in e-notation; a bitstate run's line
    says it is partial, with its hash factor and whether the budget
    stopped it."""
    output = (
        "Interrupted\nWarning: Search not completed\n"
        "State-vector 188 byte, depth reached 1188, errors: 0\n"
        "1.7817e+08 states, stored\nhash factor: 48.2099 (best if > 100.)\n"
    )
    run = check.Run("big", check.LOG_MODEL, bitstate=33, budget_seconds=480)
    states = check._number(check._STATES, output, run)
    result = check.Result(run, 0, states, 485.8, output)
    assert states == 178_170_000
    assert result.ok and not result.completed
    assert "178,170,000 states explored (bitstate, partial: -w33, hash factor 48.2099, " in (
        result.line()
    )
    assert "stopped at its 480 s budget" in result.line()
    exhaustive = check.Result(check.Run("small", check.LOG_MODEL), 0, 9, 1.0, output)
    assert not exhaustive.ok and "NOT completed" in exhaustive.line()
