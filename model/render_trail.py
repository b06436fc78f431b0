"""Print a SPIN counterexample as the list of steps the code would take.

SPIN's own replay (``spin -t -p``) prints process numbers, source lines and
state numbers; the models print, at each step, a line ``STEP <module>
<what>`` naming the module and the thing the code does, and ``VIOLATION
<invariant>`` where an invariant breaks. This script replays a trail with
the same ``-D`` switches the model was checked with and keeps those lines,
numbered, so a counterexample reads like a story about the code.

Usage::

    python model/render_trail.py model/log_protocol.pml pan.trail -D WEAKEN_PAUSE_ONCE

Exit 0 with the steps; 2 with one line on standard error when the input is
not a model and trail that SPIN can replay (no traceback reaches a user).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

CYCLE_MARK = "<<<<<START OF CYCLE>>>>>"


class RenderError(Exception):
    """The trail cannot be rendered; the message is the one line shown."""


def replay(model: Path, trail: Path, defines: list[str]) -> str:
    """SPIN's replay of ``trail`` (its standard output).

    Raises:
        RenderError: no spin, no such file, or spin refused the trail.
    """
    spin = shutil.which("spin")
    if spin is None:
        raise RenderError("spin is not installed (make installs it: scripts/install_spin.sh)")
    for path in (model, trail):
        if not path.is_file():
            raise RenderError(f"no such file: {path}")
    command = [spin, *(f"-D{d}" for d in defines), "-t", "-k", str(trail.resolve()), model.name]
    # spin found by which(), the files the user named: nothing runs a shell
    done = subprocess.run(  # noqa: S603
        command,
        cwd=model.resolve().parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 and "STEP" not in done.stdout:
        last = (done.stderr or done.stdout).strip().splitlines()
        raise RenderError(f"spin could not replay {trail}: {last[-1] if last else 'no output'}")
    return done.stdout


def steps(replayed: str) -> list[str]:
    """The named steps of a replay, in order, with the start of an
    acceptance cycle (a liveness counterexample) marked where it begins."""
    out: list[str] = []
    for raw in replayed.splitlines():
        line = raw.strip()
        if line.startswith("STEP "):
            out.append(line[len("STEP ") :])
        elif line.startswith("VIOLATION "):
            out.append("broken: " + line[len("VIOLATION ") :])
        elif CYCLE_MARK in line:
            out.append("-- from here the run repeats forever --")
    return out


def render(lines: list[str]) -> str:
    """The numbered list, one step a line."""
    if not lines:
        raise RenderError("the trail replays no named step (is it a trail of this model?)")
    width = len(str(len(lines)))
    return "\n".join(f"{n:>{width}}. {text}" for n, text in enumerate(lines, 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print a SPIN trail as named steps.")
    parser.add_argument("model", type=Path, help="the .pml the trail was found in")
    parser.add_argument("trail", type=Path, help="the trail pan wrote")
    parser.add_argument(
        "-D", dest="defines", action="append", default=[], help="a -D the model was checked with"
    )
    args = parser.parse_args(argv)
    try:
        print(render(steps(replay(args.model, args.trail, args.defines))))
    except (RenderError, OSError, subprocess.SubprocessError) as error:
        print(f"render_trail: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
