"""What ``make demo`` installs and which Python ``make`` picks: a first hour
on a fresh machine should not need Python 3.11 exactly, nor download 1.1 GB
for a demo that needs the embedded S3."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def dry_run(target: str, tmp_path: Path) -> str:
    """The commands ``make TARGET`` would run in a checkout without a venv."""
    done = subprocess.run(
        ["make", "-n", "-B", target, f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_make_demo_installs_the_embedded_extra_only(tmp_path: Path) -> None:
    commands = dry_run("demo", tmp_path)
    installs = [line for line in commands.splitlines() if "pip install" in line and "-e" in line]
    assert installs and all("'.[embedded]'" in line for line in installs), commands
    assert "all,dev" not in commands and "epochgc demo" in commands


def fake_python(folder: Path, name: str, version: tuple[int, int]) -> None:
    """A ``name`` on PATH that answers the version check as ``version``."""
    script = folder / name
    script.write_text(
        "#!/bin/sh\n"
        f'exec {sys.executable} -c "import sys; '
        f'sys.exit(not (3, 11) <= {version} <= (3, 13))"\n'
    )
    script.chmod(0o755)


def find_supported(fakes: Path) -> subprocess.CompletedProcess[str]:
    """``find_python.sh supported`` with only the fakes in ``fakes`` on PATH
    (no Python of this machine)."""
    return subprocess.run(
        ["/bin/bash", "scripts/find_python.sh", "supported"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PATH": str(fakes)},
        check=False,
    )


@pytest.mark.parametrize(
    ("available", "picked"),
    [
        ({"python3": (3, 12)}, "python3"),
        ({"python3": (3, 10), "python3.12": (3, 12)}, "python3.12"),
        ({"python3": (3, 14), "python3.11": (3, 11), "python3.13": (3, 13)}, "python3.11"),
    ],
)
def test_make_picks_a_supported_python_not_only_311(
    tmp_path: Path, available: dict[str, tuple[int, int]], picked: str
) -> None:
    for name, version in available.items():
        fake_python(tmp_path, name, version)
    done = find_supported(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / picked)


def test_with_no_supported_python_make_says_what_is_needed(tmp_path: Path) -> None:
    fake_python(tmp_path, "python3", (3, 10))
    done = find_supported(tmp_path)
    assert done.returncode == 1 and "Python 3.11, 3.12 or 3.13 is required" in done.stderr
