"""The wheel as an adopter installs it (issue 30's "done when"): built from
this checkout, installed outside the repository, it answers `--version`
and `--help` and runs `epochgc demo` from any folder, with the example
configurations inside it. The dependencies come from this test's
environment (no package index needed): only epochgc itself is the wheel's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import epochgc
from tests.support.cli import REPO

NOT_COPIED = (
    ".git",
    ".venv*",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
)


def test_the_wheel_installs_and_runs_outside_the_repository(tmp_path: Path) -> None:
    # Built from a copy: setuptools leaves build/ and *.egg-info where it builds.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_COPIED))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("epochgc-*.whl")
    assert wheel.name.startswith(f"epochgc-{epochgc.__version__}-")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"epochgc/examples/{n}" for n in ("local.toml", "default.toml")} <= names
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
         str(wheel)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    script = site / "bin" / "epochgc"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(script), *args],
            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip

    where = subprocess.run(
        [sys.executable, "-c", "import epochgc; print(epochgc.__file__)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert where.stdout.strip().startswith(str(site)), where.stdout + where.stderr
    version = run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"epochgc {epochgc.__version__}"
    helped = run("--help")
    assert helped.returncode == 0 and "demo" in helped.stdout
    demo = run("demo", "--duration", "8")
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "demo OK" in demo.stdout
