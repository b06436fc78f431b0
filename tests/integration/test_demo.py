"""``epochgc demo`` as the README runs it (shorter), as a real process."""

from __future__ import annotations

import re

from tests.support.cli import run_cli


def test_demo_runs_the_lifecycle_and_verifies_it() -> None:
    done = run_cli("demo", "--duration", "8", "--config", "config/local.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "time phase" in done.stdout  # the live table
    assert "demo OK" in done.stdout
    assert "records read back:" in done.stdout
    # A run longer than --duration says where the rest went.
    spent = re.search(
        r"time: start (\d+)s .*produce (\d+)s .*quiesce (\d+)s .*verify (\d+)s", done.stdout
    )
    assert spent, done.stdout
    assert int(spent.group(2)) >= 8


def test_demo_refuses_a_real_bucket() -> None:
    real = {"EPOCHGC_STORE__EMBEDDED": "false", "EPOCHGC_STORE__BUCKET": "some-bucket"}
    refused = run_cli("demo", "--duration", "8", env=real)
    assert refused.returncode == 2
    assert "embedded S3 only" in refused.stderr
