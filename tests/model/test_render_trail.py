"""The trail renderer: named steps from a replay, one line on bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import render_trail

SCRIPT = Path(render_trail.__file__)

REPLAY = """\
  1:  proc  1 (Ticker:1) log_protocol.pml:190 (state 3) [ctl = (ctl+1)]
      STEP watermarks/ticker.py Ticker: epoch_tick at offset 2 (cluster epoch 2)
<<<<<START OF CYCLE>>>>>
                  VIOLATION no deletion while paused
spin: log_protocol.pml:577, Error: assertion violated
"""


def test_steps_keep_named_lines_and_mark_the_cycle() -> None:
    assert render_trail.steps(REPLAY) == [
        "watermarks/ticker.py Ticker: epoch_tick at offset 2 (cluster epoch 2)",
        "-- from here the run repeats forever --",
        "broken: no deletion while paused",
    ]


def test_render_numbers_the_steps() -> None:
    assert render_trail.render(["a", "b"]) == "1. a\n2. b"


def test_bad_input_is_one_line_without_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "nope.pml"), str(tmp_path / "nope.trail")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("render_trail: no such file")


def test_a_file_that_is_no_trail_is_refused(tmp_path: Path) -> None:
    trail = tmp_path / "x.trail"
    trail.write_text("not a trail\n")
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            str(SCRIPT.parent / "lease_ownership.pml"),
            str(trail),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
