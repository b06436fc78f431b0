"""The wheel as an adopter installs it (issue 30's "done when"): built from
this checkout, installed outside the repository, it answers `--version`
and `--help` and runs `epochgc demo` from any folder, with the example
configurations inside it. The dependencies come from this test's
environment (no package index needed): only epochgc itself is the wheel's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
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
    # What the CLI, the units and the manifests point at is installed too.
    for page in ("operating", "spark", "contract"):
        shown = run("docs", page)
        assert shown.returncode == 0, shown.stderr
        path = Path(shown.stdout.strip())
        assert path.is_file() and str(path).startswith(str(site)), path
    pointed = set(
        re.findall(r"epochgc docs (\w+)", helped.stdout + run("gc", "spark", "--help").stdout)
    )
    assert pointed and all(run("docs", page).returncode == 0 for page in pointed), pointed


def test_the_sdist_and_the_wheel_build_and_pass_twine_check(tmp_path: Path) -> None:
    # What a release publishes: `python -m build` (without isolation: no
    # package index in the test; setuptools and wheel are dev dependencies)
    # makes both, and `twine check` passes them (metadata, README rendering).
    source = tmp_path / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_COPIED))
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "-o", str(tmp_path / "dist"),
         str(source)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    sdist = tmp_path / "dist" / f"epochgc-{epochgc.__version__}.tar.gz"
    (wheel,) = (tmp_path / "dist").glob(f"epochgc-{epochgc.__version__}-py3-none-any.whl")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    root = f"epochgc-{epochgc.__version__}"
    assert f"{root}/epochgc/docs/operating.md" in names and f"{root}/README.md" in names
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout
