"""A base install (no extras) runs the daemon and the CLI; a command that
needs an extra says which one in one line.

A base install is emulated in a subprocess by an import hook that refuses
the extras' packages (moto, pyspark) the way a missing package does; CI
also installs and tests the package on another Python version."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.s3 import S3ObjectStore
from tests.support.cli import run_python
from tests.support.config_files import write_server_config

BLOCKER = """
import sys, importlib.abc
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"moto", "pyspark"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Missing())
from epochgc.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def run_base(*args: str) -> subprocess.CompletedProcess[str]:
    return run_python("-c", BLOCKER, *args)


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("demo", "--duration", "20", "--config", "config/local.toml"), "embedded"),
        (("embedded-s3", "--port", "0"), "embedded"),
        (("gc", "spark", "--config", "config/local.toml"), "spark"),
    ],
)
def test_a_command_that_needs_an_extra_names_it_in_one_line(
    args: tuple[str, ...], extra: str
) -> None:
    done = run_base(*args)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"pip install 'epochgc[{extra}]'" in done.stderr, done.stderr
    assert len([line for line in done.stderr.splitlines() if "epochgc[" in line]) == 1


def test_the_base_install_writes_plans_and_deletion_records(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    """pyarrow is part of the base install: a dry run's plan and a deleting
    round's record are Parquet files."""
    config = write_server_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)
    done = run_base("gc", "collect", "--dry-run", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert any(i.key.endswith("plan.parquet") for i in store.list_objects("epochgc/gc/runs/"))


def test_the_base_install_needs_no_extra_for_the_cli_and_the_daemon(tmp_path: Path) -> None:
    for args in (("--help",), ("config", "show", "--config", "config/aws.example.toml")):
        done = run_base(*args)
        assert done.returncode == 0, done.stderr
    # The daemon's modules import without any extra.
    probe = run_python(
        "-c",
        BLOCKER.split("from epochgc.cli", maxsplit=1)[0]
        + "import epochgc.gc.daemon.scheduler, epochgc.wiring.daemon_process,"
        + " epochgc.wiring.reconciler_process\n",
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
