"""An installed epochgc outside the repository: `epochgc demo` runs with no
arguments from any folder (it used to ask for config/local.toml, which the
wheel does not ship), and `epochgc config example` writes the example
configurations, identical to the repository's config/ files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli import REPO


def run_elsewhere(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``epochgc`` from ``cwd``, a folder with no config/ in it."""
    return subprocess.run(
        [sys.executable, "-m", "epochgc.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )


def test_the_demo_runs_with_no_arguments_from_any_folder(tmp_path: Path) -> None:
    done = run_elsewhere(tmp_path, "demo", "--duration", "8")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "demo OK" in done.stdout


def test_config_example_writes_the_shipped_examples(tmp_path: Path) -> None:
    done = run_elsewhere(tmp_path, "config", "example", "here")
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in (tmp_path / "here").iterdir())
    assert written == sorted(p.name for p in (REPO / "config").iterdir())
    for name in written:
        assert (tmp_path / "here" / name).read_text() == (REPO / "config" / name).read_text()
    again = run_elsewhere(tmp_path, "config", "example", "here")
    assert again.returncode == 1 and "--force" in again.stderr
    shown = run_elsewhere(tmp_path, "config", "show", "--config", "here/local.toml")
    assert shown.returncode == 0 and "embedded = true" in shown.stdout
