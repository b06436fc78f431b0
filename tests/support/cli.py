"""Running the ``epochgc`` command line as a separate process, as an
operator would (real argument parsing, logging set-up and exit codes), and
any other module of the repository the same way (``run_python``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_python(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """This interpreter with ``args``, in the repository, to the end; its
    output captured as text, ``env`` over this environment."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "epochgc.cli", *args, env=env)


def start_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``epochgc ARGS`` started in the background, in the repository, its
    output piped as text, ``env`` over this environment: for a test that
    acts while it runs (signals it, waits for what it writes)."""
    return subprocess.Popen(
        [sys.executable, "-m", "epochgc.cli", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


FATAL_PREFIX = "epochgc: "
"""How the line a command ends with on an error starts (``main``)."""


def fatal_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of ``done``'s stderr that say why the command failed:
    main's bare ``epochgc: ...`` lines, never a traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    return [line for line in done.stderr.splitlines() if line.startswith(FATAL_PREFIX)]
