"""The Spark job on a real cluster manager: a standalone master and two bare
workers (``tests/support/spark_cluster.py``), driven the way an operator
drives it, from separate processes (``epochgc gc spark --master spark://...``
and the ``spark-submit`` recipe of docs/spark.md). The workers have no
epochgc, boto3 or pyarrow and no AWS credentials: whatever the tasks need
must be shipped or handed over.

One cluster and one packed environment serve every test here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from epochgc.storage.embedded import EMBEDDED_ACCESS_KEY, EMBEDDED_SECRET_KEY, EmbeddedS3
from epochgc.storage.keys import encode_l0_key
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.support.cli import REPO
from tests.support.config_files import gc_sections, write_server_config
from tests.support.moto_seed import seed_objects
from tests.support.s3_proxy import s3_fault_proxy
from tests.support.spark_cluster import StandaloneCluster

pytestmark = pytest.mark.slow

GC = gc_sections(shards=8)


@dataclass(frozen=True)
class Seeded:
    """The cluster, the executors' package and a test's bucket holding L0
    objects of epochs 4..6 in 8 shards with M = 5: ``keys`` all of them,
    ``stay`` those above M."""

    tmp_path: Path
    cluster: StandaloneCluster
    package_dir: Path
    s3: EmbeddedS3
    store: S3ObjectStore
    bucket: str
    keys: set[str]
    stay: set[str]

    def left(self) -> set[str]:
        return {o.key for o in self.store.list_objects("epochgc/l0/")}

    def keyless_config(self, spark: str) -> Path:
        """A configuration with no key pair (the driver's AWS chain
        provides it) and ``spark`` inside ``[spark]``."""
        config = self.tmp_path / "gc.toml"
        config.write_text(
            f'[store]\nbucket = "{self.bucket}"\nendpoint_url = "{self.s3.endpoint_url}"\n'
            f'addressing_style = "path"\n{GC}[spark]\n{spark}'
        )
        return config


@pytest.fixture
def seeded(
    tmp_path: Path,
    spark_cluster: StandaloneCluster,
    spark_package_dir: Path,
    spark_cache_home: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Seeded:
    # The drivers' shared environment cache is the tests' (not ~/.cache).
    monkeypatch.setenv("XDG_CACHE_HOME", str(spark_cache_home))
    Controller(store, "epochgc").advance_to(5)
    keys = {
        encode_l0_key("epochgc", shard, epoch, str(uuid.uuid4()))
        for shard in range(8)
        for epoch in (4, 5, 6)
        for _ in range(3)
    }
    seed_objects(bucket, keys)
    stay = {k for k in keys if "/000000000000000006/" in k}
    return Seeded(tmp_path, spark_cluster, spark_package_dir, s3_server, store, bucket, keys, stay)


def _cli(*args: str) -> list[str]:
    """An ``epochgc`` command as the operator's shell runs it."""
    return [sys.executable, "-m", "epochgc.cli", *args]


def _driver_env(**extra: str) -> dict[str, str]:
    """The operator's shell: this virtualenv's commands first on PATH, the
    driver on loopback, no PYSPARK_PYTHON pointing at a local interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.update(extra)
    return env


def _driver_env_with_credentials() -> dict[str, str]:
    """``_driver_env`` with the embedded S3's key pair in the environment
    (and no AWS configuration files): the only credentials there are."""
    return _driver_env(
        AWS_ACCESS_KEY_ID=EMBEDDED_ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=EMBEDDED_SECRET_KEY,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False
    )


def _json_of(stdout: str) -> dict[str, object]:
    summary: dict[str, object] = json.loads(stdout[stdout.index("{") :])
    return summary


def _recipe(page: Path) -> list[list[str]]:
    """The commands of the fenced block that follows the
    ``<!-- tested by tests/integration/test_spark_cluster.py -->`` marker."""
    text = page.read_text()
    found = re.search(
        r"<!-- tested by tests/integration/test_spark_cluster\.py -->\s*```\w*\n(.*?)```",
        text,
        re.S,
    )
    assert found, f"{page.name} has no tested spark-submit recipe"
    return [shlex.split(line) for line in found.group(1).replace("\\\n", " ").splitlines()]


def test_the_spark_submit_recipe_deletes_exactly_the_eligible_keys_on_bare_workers(
    seeded: Seeded,
) -> None:
    """docs/spark.md's recipe, word for word but for the master, the
    package folder and the configuration file. (With the wheel in
    ``--py-files`` instead of the zip, every task failed with
    ``ModuleNotFoundError: No module named 'epochgc'``.)"""
    config = write_server_config(
        seeded.tmp_path / "gc.toml", seeded.s3.endpoint_url, seeded.bucket, GC
    )
    env = _driver_env()
    replace = {
        "spark://spark-master:7077": seeded.cluster.master_url,
        "dist/spark": str(seeded.package_dir),
        "gc.toml": str(config),
    }
    build, package, submit = (
        [_substitute(word, replace) for word in command]
        for command in _recipe(REPO / "docs" / "spark.md")
    )
    built = _run(build, env)
    assert built.returncode == 0, built.stderr
    made = _run(package, env)
    assert made.returncode == 0, made.stderr
    done = _run([*submit, "--json"], env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = _json_of(done.stdout)
    assert (summary["engine"], summary["deleted"]) == (
        "spark-inventory",
        len(seeded.keys) - len(seeded.stay),
    )
    assert seeded.left() == seeded.stay


def test_the_command_spark_package_prints_runs_as_printed(seeded: Seeded) -> None:
    """The last line of ``epochgc spark package --master M --config F`` is
    a spark-submit command; run exactly as printed, it deletes the eligible
    keys. (The printed line used to lack spark.pyspark.driver.python, and
    Spark then looked for ./environment/bin/python on the driver.)"""
    config = write_server_config(
        seeded.tmp_path / "printed.toml", seeded.s3.endpoint_url, seeded.bucket, GC
    )
    env = _driver_env()
    out = seeded.tmp_path / "printed-package"
    shutil.copytree(seeded.package_dir, out)  # the environment is built once per session
    made = _run(
        _cli("spark", "package", "--out", str(out), "--master", seeded.cluster.master_url,
             "--config", str(config)),
        env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    printed = made.stdout.strip().splitlines()[-1]
    assert printed.startswith("spark-submit ") and "spark.pyspark.driver.python=" in printed
    done = _run(shlex.split(printed), env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert seeded.left() == seeded.stay


def _substitute(word: str, replace: dict[str, str]) -> str:
    for old, new in replace.items():
        word = word.replace(old, new)
    return word


def test_credentials_only_in_the_drivers_environment_reach_the_tasks(seeded: Seeded) -> None:
    """No key pair in the configuration, none on the workers: the driver's
    AWS chain (here its environment) is what the tasks must use."""
    config = seeded.keyless_config(f'package_dir = "{seeded.package_dir}"\n')
    env = _driver_env_with_credentials()
    built = _run(_cli("inventory", "build", "--config", str(config)), env)
    assert built.returncode == 0, built.stderr
    done = _run(
        _cli("gc", "spark", "--mode", "inventory", "--master", seeded.cluster.master_url,
             "--conf", "spark.driver.host=127.0.0.1", "--config", str(config), "--json"),
        env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = _json_of(done.stdout)
    assert (summary["deleted"], summary["errors"]) == (len(seeded.keys) - len(seeded.stay), 0)
    assert seeded.left() == seeded.stay
    assert EMBEDDED_SECRET_KEY not in done.stdout + done.stderr, "no secret in the output"
    assert summary["environment"] == "up to date", "the package folder's archive is the cache's"
    assert list(summary["seconds"])[:2] == ["package", "spark_start"]


def _slow_deletes(method: str, path: str, _headers: Mapping[str, str]) -> None:
    """Every DeleteObjects takes 0.75 s, so a task is still running when its
    worker is killed."""
    if method == "POST" and "delete" in path:
        time.sleep(0.75)


def test_gc_spark_ships_itself_and_a_worker_killed_mid_job_loses_nothing(
    seeded: Seeded,
) -> None:
    """Listing mode through ``epochgc gc spark --master spark://...`` (which
    ships the package itself, and takes ``--conf`` over ``[spark] conf``:
    the table's driver host is an address this machine does not have);
    once a task runs on worker 0, that worker dies with its executor; the
    task reruns on worker 1 and the bucket ends exactly as it should."""
    cluster = seeded.cluster
    with s3_fault_proxy(seeded.s3.endpoint_url, _slow_deletes) as proxy:
        config = write_server_config(
            seeded.tmp_path / "gc.toml",
            proxy.endpoint,
            seeded.bucket,
            GC + f'[spark]\nlisting_tasks = 8\npackage_dir = "{seeded.package_dir}"\n'
            'conf = { "spark.driver.host" = "192.0.2.1", "spark.executor.memory" = "512m" }\n',
        )
        driver = subprocess.Popen(
            _cli("gc", "spark", "--master", cluster.master_url,
                 "--conf", "spark.driver.host=127.0.0.1", "--config", str(config), "--json"),
            cwd=REPO,
            env=_driver_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 180
            while not cluster.worker_runs_python(0):
                assert driver.poll() is None, "the job ended before a task started on worker 0"
                assert time.monotonic() < deadline, "no task started on worker 0"
                time.sleep(0.1)
            cluster.kill_worker(0)
            out, err = driver.communicate(timeout=240)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.communicate()
            cluster.restart_worker(0)
    assert driver.returncode == 0, err[-3000:]
    # Spark logs the executor's loss as an error; the task lost with it is
    # rerun without counting as a task failure (logged only at INFO).
    assert "Lost executor" in err, err[-3000:]
    summary = _json_of(out)
    assert (summary["deleted"], summary["errors"]) == (len(seeded.keys) - len(seeded.stay), 0)
    # Each of the 8 tasks sees its shard's 6 eligible keys: the total holds
    # only if the lost task's result came from its rerun.
    assert summary["eligible"] == len(seeded.keys) - len(seeded.stay)
    assert seeded.left() == seeded.stay


def test_executors_without_credentials_fail_the_run_in_one_line_without_retrying(
    seeded: Seeded,
) -> None:
    """``[spark] credentials = "executor"`` on workers that have none: every
    shard fails at once with a credentials error (permanent, not retried),
    the run fails naming the cause in one line, nothing is deleted."""
    config = seeded.keyless_config(
        f'listing_tasks = 2\npackage_dir = "{seeded.package_dir}"\ncredentials = "executor"\n'
    )
    done = _run(
        _cli("gc", "spark", "--master", seeded.cluster.master_url,
             "--conf", "spark.driver.host=127.0.0.1", "--config", str(config), "--json"),
        _driver_env_with_credentials(),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    causes = [line for line in done.stderr.splitlines() if "no credentials found" in line]
    assert causes, done.stderr[-3000:]
    summary = _json_of(done.stdout)
    assert (summary["success"], summary["deleted"], summary["errors"]) == (False, 0, 8)
    assert seeded.left() == seeded.keys
