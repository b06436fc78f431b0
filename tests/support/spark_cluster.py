"""Test-only: a Spark standalone cluster (one master, two workers) started
from the installed pyspark's ``spark-class``, on loopback and free ports.

The workers run with a clean environment, as a bare node would: no
epochgc, boto3 or pyarrow on their Python path (``python3`` is whatever the
system has), no AWS credentials, no ``PYSPARK_PYTHON``. A job only works on
them if it ships its code and environment (``epochgc spark package``) and
hands the credentials over. Each worker runs in a process group of its own,
so ``kill_worker`` takes down the worker JVM, its executor and the executor's
Python workers at once, as a lost node does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.servers import free_port


def spark_home() -> Path:
    """The installed pyspark's folder, which is a Spark distribution."""
    import pyspark  # noqa: PLC0415 - only Spark tests need it

    return Path(pyspark.__file__).parent


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers of 1 core each, under ``folder``.

    Example::

        cluster = StandaloneCluster(tmp_path)
        cluster.start()
        ...  # epochgc gc spark --master cluster.master_url
        cluster.stop()
    """

    folder: Path
    workers: int = 2
    worker_memory: str = "1g"
    master_port: int = field(default_factory=free_port)
    master_ui_port: int = field(default_factory=free_port)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def start(self, timeout: float = 60.0) -> None:
        """Start the master, then the workers; return once all are ALIVE."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._procs.append(
            self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.master_ui_port),
            )
        )
        for n in range(self.workers):
            (self.folder / f"worker-{n}").mkdir(exist_ok=True)
            self._procs.append(self._spawn_worker(n))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"a Spark daemon exited ({proc.returncode}): {self._log_tail()}"
                    )
            if self.alive_workers() == self.workers:
                return
            time.sleep(0.3)
        raise RuntimeError(f"{self.workers} workers not ALIVE after {timeout}s: {self._log_tail()}")

    def master_state(self) -> dict[str, Any]:
        """The master's JSON status page (workers, applications)."""
        url = f"http://127.0.0.1:{self.master_ui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                state: dict[str, Any] = json.load(answer)
                return state
        except (OSError, json.JSONDecodeError):
            # Not answering yet, refused, or too slow to answer (a master
            # still starting on a loaded machine: a read timeout is an
            # OSError but neither a URLError nor a ConnectionError).
            return {}

    def alive_workers(self) -> int:
        workers = self.master_state().get("workers", [])
        return sum(1 for w in workers if w.get("state") == "ALIVE")

    def worker_pids(self, n: int) -> list[int]:
        """Every live process of worker ``n``'s group (JVMs and Python workers)."""
        pgid = self._procs[1 + n].pid
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    found.append(int(entry.name))
            except ProcessLookupError:
                continue
        return found

    def worker_runs_python(self, n: int) -> bool:
        """Whether worker ``n`` runs a Python worker (a task has started there)."""
        for pid in self.worker_pids(n):
            try:
                cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes()
            except OSError:
                continue
            if b"python" in cmdline.split(b"\0", 1)[0]:
                return True
        return False

    def kill_worker(self, n: int) -> None:
        """SIGKILL worker ``n`` with its executor and Python workers (a lost node)."""
        os.killpg(self._procs[1 + n].pid, signal.SIGKILL)
        self._procs[1 + n].wait(timeout=10)

    def restart_worker(self, n: int) -> None:
        """Start a killed worker ``n`` again, without waiting for it to join
        (later jobs get its executor once it has registered)."""
        old = self._procs[1 + n]
        if old.poll() is None:
            return
        self._procs[1 + n] = self._spawn_worker(n)

    def _spawn_worker(self, n: int) -> subprocess.Popen[bytes]:
        """Worker ``n``: one core, on a free UI port, working in its folder."""
        return self._spawn(
            f"worker-{n}",
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(free_port()),
            "--cores",
            "1",
            "--memory",
            self.worker_memory,
            "--work-dir",
            str(self.folder / f"worker-{n}"),
        )

    def stop(self) -> None:
        """Stop every daemon (workers first); idempotent."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)

    def _log_tail(self) -> str:
        """The last lines of every daemon's log, for a failure message."""
        tails = []
        for log in sorted(self.folder.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-5:]
            tails.append(f"{log.name}: " + " | ".join(lines))
        return "; ".join(tails)

    def _spawn(self, name: str, main_class: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.folder / f"{name}.log").open("ab")
        return subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), main_class, *args],
            env=self._clean_environment(name),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def _clean_environment(self, name: str) -> dict[str, str]:
        """What a bare node has: a system PATH and Java, nothing of the
        developer's (no virtualenv, no AWS variables, an empty HOME)."""
        home = self.folder / f"home-{name}"
        home.mkdir(exist_ok=True)
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.folder),
            # Not a credential: only keeps a failing lookup from waiting on
            # the instance-metadata address, which does not exist here.
            "AWS_EC2_METADATA_DISABLED": "true",
        }
