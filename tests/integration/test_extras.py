"""A base install (no extras) runs the daemon and the CLI; a command that
needs an extra says which one in one bare line, before it contacts the store.

A base install is emulated in a subprocess by an import hook that refuses
the extras' packages (moto, pyspark) the way a missing package does; a
broken base install (pyarrow missing) the same way. CI also installs and
tests the package on another Python version."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.s3 import S3ObjectStore
from tests.support.cli import run_python
from tests.support.config_files import write_gc_config, write_server_config
from tests.support.s3_proxy import s3_fault_proxy

EXTRAS = ("moto", "pyspark")
"""The top-level packages of the extras: what a base install lacks."""

BLOCKER = """
import sys, importlib.abc
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Missing())
from epochgc.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def blocker(missing: tuple[str, ...]) -> str:
    """A ``-c`` program: the command line with ``missing`` not importable."""
    return f"MISSING = {set(missing)!r}\n" + BLOCKER


def run_base(
    *args: str, missing: tuple[str, ...] = EXTRAS, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command line as a base install runs it (``missing`` not installed)."""
    return run_python("-c", blocker(missing), *args, env=env)


def run_base_on_store(
    tmp_path: Path,
    s3_server: EmbeddedS3,
    bucket: str,
    *args: str,
    missing: tuple[str, ...],
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], list[tuple[str, str]]]:
    """``run_base`` on a configuration naming ``bucket`` through a proxy
    that records every request the command sends (method, path)."""
    requests: list[tuple[str, str]] = []

    def record(method: str, path: str, _headers: Mapping[str, str]) -> None:
        requests.append((method, path))

    with s3_fault_proxy(s3_server.endpoint_url, record) as proxy:
        config = write_gc_config(
            tmp_path / "c.toml", proxy.endpoint, bucket, '[metrics]\nlisten = ""\n'
        )
        done = run_base(*args, "--config", str(config), missing=missing, env=env)
    return done, requests


def assert_stopped_before_the_store(
    done: subprocess.CompletedProcess[str], requests: list[tuple[str, str]], line: str
) -> None:
    """The command exited 1 with ``line`` as all of its stderr, and sent no
    request to the store."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [line], done.stderr
    assert requests == [], "no request reached the store"


@pytest.mark.parametrize(
    ("args", "needed_by", "extra", "module"),
    [
        (
            ("demo", "--duration", "20", "--config", "config/local.toml"),
            "the embedded S3",
            "embedded",
            "moto",
        ),
        (("embedded-s3", "--port", "0"), "the embedded S3", "embedded", "moto"),
        # The quickstart's config (store.embedded): no store exists before moto.
        (
            ("gc", "collect", "--dry-run", "--config", "config/local.toml"),
            "the embedded S3",
            "embedded",
            "moto",
        ),
        (("gc", "spark", "--config", "config/local.toml"), "gc spark", "spark", "pyspark"),
        (("verify", "--seed", "1"), "verify", "embedded", "moto"),
    ],
)
def test_a_command_that_needs_an_extra_says_so_in_one_bare_line(
    args: tuple[str, ...], needed_by: str, extra: str, module: str
) -> None:
    done = run_base(*args)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"epochgc: {needed_by} needs the '{extra}' extra: pip install 'epochgc[{extra}]' "
        f"(missing module '{module}')"
    ], done.stderr


def test_verify_with_spark_stops_before_its_run_without_the_spark_extra(tmp_path: Path) -> None:
    """Its Spark job starts half-way through a run: the extra is checked
    before the run's embedded S3 and workers start, not when the job fails."""
    folder = tmp_path / "runs"
    done = run_base(
        *("verify", "--seed", "1", "--duration", "2", "--quiesce-timeout", "5", "--spark"),
        *("--folder", str(folder)),
        missing=("pyspark",),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "epochgc: verify --spark needs the 'spark' extra: "
        "pip install 'epochgc[spark]' (missing module 'pyspark')"
    ], done.stderr
    assert not folder.exists(), "nothing ran"


@pytest.mark.parametrize(
    ("args", "needed_by"),
    [
        (("gc", "collect", "--dry-run"), "gc collect"),
        (("gc", "collect"), "gc collect"),
        (("daemon", "--duration", "5"), "daemon"),
        (
            (
                "gc",
                "explain",
                "epochgc/l0/000/000000000000000001/b64a0017-4ab1-42ca-85bb-56e6eda925c7",
            ),
            "gc explain",
        ),
        (("gc", "runs", "--deleted", "20260101T000000Z-00000000"), "gc runs --deleted"),
    ],
)
def test_a_command_that_writes_or_reads_parquet_checks_pyarrow_before_the_store(
    tmp_path: Path,
    s3_server: EmbeddedS3,
    bucket: str,
    store: S3ObjectStore,
    args: tuple[str, ...],
    needed_by: str,
) -> None:
    """A broken base install (pyarrow missing, as it was before pyarrow
    joined the base install): the command stops before its first request,
    not after the capability probes (which write) or a round's listing."""
    done, requests = run_base_on_store(tmp_path, s3_server, bucket, *args, missing=("pyarrow",))
    assert_stopped_before_the_store(
        done,
        requests,
        f"epochgc: {needed_by} needs 'pyarrow', part of epochgc's base install: "
        "pip install --force-reinstall epochgc",
    )
    assert list(store.list_objects("")) == []


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
        blocker(EXTRAS).split("from epochgc.cli", maxsplit=1)[0]
        + "import epochgc.gc.daemon.scheduler, epochgc.wiring.daemon_process,"
        + " epochgc.wiring.reconciler_process\n",
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr


def test_gc_spark_on_a_cluster_without_venv_pack_stops_before_the_store(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str
) -> None:
    """A partial spark extra (pyspark, no venv-pack) and no environment
    built yet: ``gc spark`` on a cluster master would build one after the
    capability probes (which write). It stops before them."""
    master = "spark://127.0.0.1:9"
    done, requests = run_base_on_store(
        tmp_path,
        s3_server,
        bucket,
        *("gc", "spark", "--master", master),
        missing=("venv_pack",),
        env={"XDG_CACHE_HOME": str(tmp_path / "cache")},  # nothing built yet
    )
    assert_stopped_before_the_store(
        done,
        requests,
        f"epochgc: gc spark on {master} needs the 'spark' extra: "
        "pip install 'epochgc[spark]' (missing module 'venv_pack')",
    )
