"""The numbered host install in docs/operating.md ("Worked deployment")
creates every path the systemd units name, and the units point at nothing
a host with only the wheel installed lacks (they named
file:///opt/epochgc/docs/operating.md, which no install step made)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNITS = sorted((REPO / "deploy" / "systemd").glob("*.service")) + sorted(
    (REPO / "deploy" / "systemd").glob("*.timer")
)
PATH = re.compile(r"/(?:opt|etc|var)/epochgc[\w/.%-]*")


def install_steps() -> str:
    text = (REPO / "docs" / "operating.md").read_text()
    return text.split("<!-- host-install:begin -->", 1)[1].split("<!-- host-install:end -->")[0]


def test_the_steps_are_numbered_and_end_with_the_processes_running() -> None:
    steps = install_steps()
    numbers = [int(n) for n in re.findall(r"^(\d+)\. ", steps, re.M)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 5
    for needed in ("useradd", "python3 -m venv", "pip install", "daemon-reload", "enable --now"):
        assert needed in steps, needed


def test_every_path_a_unit_names_is_made_by_a_step() -> None:
    steps = " ".join(install_steps().split())
    named = {
        path.replace("%i", "INSTANCE").rstrip(".")
        for unit in UNITS
        for line in unit.read_text().splitlines()
        if not line.startswith("#")
        for path in PATH.findall(line)
    }
    assert {"/opt/epochgc/venv/bin/epochgc", "/etc/epochgc/config.toml"} <= named
    missing = [
        path
        for path in sorted(named)
        if not any(path == made or path.startswith(made + "/") for made in PATH.findall(steps))
    ]
    assert missing == [], f"no install step makes {missing}"


def test_no_unit_points_at_documentation_the_install_does_not_put_there() -> None:
    for unit in UNITS:
        assert "Documentation=file://" not in unit.read_text(), unit.name
