"""The child processes of an ``epochgc verify`` run, and how they are
started and stopped.

The run's product processes (reconciler nodes and GC daemons, each an
``epochgc.verify.worker``) are killed, stopped, paused and restarted by
the disturbances and brought back by the quiesce; the run's Spark job is
started here too. Every child goes through ``Processes``, so that when a
run ends, however it ends (done, interrupted, or a wait that gave up),
``stop_all`` leaves none of them running.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path


class Processes:
    """The worker processes, with their kill/pause/restart history."""

    def __init__(
        self,
        folder: Path,
        config: Path,
        seed: int,
        env: dict[str, str],
        worker_args: tuple[str, ...] = (),
    ) -> None:
        self._folder = folder
        self._worker_args = worker_args
        self._config = config
        self._seed = seed
        self._env = env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.roles: dict[str, str] = {}
        self._generation: Counter[str] = Counter()
        self._others: list[subprocess.Popen[bytes]] = []

    def start(self, ident: str, role: str, clock_skew: float = 0.0) -> None:
        self.roles[ident] = role
        self._generation[ident] += 1
        logfile = (self._folder / f"{ident}.log").open("ab")
        self.procs[ident] = subprocess.Popen(  # noqa: S603 - our interpreter, our module
            [
                sys.executable,
                "-m",
                "epochgc.verify.worker",
                "--role",
                role,
                "--id",
                ident,
                "--config",
                str(self._config),
                "--folder",
                str(self._folder),
                "--seed",
                str(self._seed * 1000 + self._generation[ident]),
                "--clock-skew",
                str(clock_skew),
                *self._worker_args,
            ],
            stdout=logfile,
            stderr=logfile,
            env=self._env,
        )

    def kill(self, ident: str) -> None:
        proc = self.procs[ident]
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def terminate(self, ident: str) -> None:
        """A clean stop (SIGTERM): a node steps down and releases its
        ownership records and node lease; a daemon its roles. Killed after
        20 s if it does not stop."""
        proc = self.procs[ident]
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        wait_or_kill(proc)

    def adopt(self, proc: subprocess.Popen[bytes]) -> None:
        """Another child of the run (the Spark job): never disturbed, but
        stopped with the workers if still running when the run ends
        (interrupted, or the wait for it gave up)."""
        self._others.append(proc)

    def stop_all(self) -> None:
        """Every process still running: SIGTERM to all, then the same wait."""
        every = [*self.procs.values(), *self._others]
        for proc in every:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in every:
            wait_or_kill(proc)


def wait_or_kill(proc: subprocess.Popen[bytes], grace_seconds: float = 20.0) -> None:
    """Wait for a process asked to stop; SIGKILL it after ``grace_seconds``."""
    try:
        proc.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_spark_job(config: Path, folder: Path) -> subprocess.Popen[bytes]:
    """``gc spark`` on a local Spark, its output in ``spark.log``."""
    command = ("-m", "epochgc.cli", "gc", "spark", "--master", "local[1]", "--config")
    return subprocess.Popen(  # noqa: S603 - our interpreter, our module
        [sys.executable, *command, str(config)],
        stdout=(folder / "spark.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
