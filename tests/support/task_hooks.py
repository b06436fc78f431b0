"""Test-only subscribers to a Spark task's ``ClientCreated``: each is
called in a Spark Python worker with the event of a task's new boto3
client, so it pickles (a plain class with plain fields; it travels in
``TaskSpec.events``) and reports through files, never through memory the
test process could see.

* ``DeleteLog`` appends one line per DeleteObjects the store answered
  (``delete <unix time> <keys deleted>``) and one per client a task made
  (``start <unix time>``): the rate the store saw, measured from its side.
* ``PauseAfterDeletes`` pauses the collector (``gc pause``, the real
  control document) right after the n-th DeleteObjects of the whole job: an
  operator's pause landing mid-job.
* ``FailBeforeDelete`` raises inside a task right before its n-th
  DeleteObjects (a task crashing after it deleted some keys);
  ``ExitBeforeDelete`` ends the Python worker there instead (``os._exit``:
  an executor killed, no code of the task runs after); ``FailAtStart``
  raises as soon as the task opens the store (what a task sees when the
  executor cannot import epochgc).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from epochgc.gc.spark.tasks import ClientCreated


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@dataclass(frozen=True)
class DeleteLog:
    path: str

    def __call__(self, event: ClientCreated) -> None:
        client = event.client
        _append(self.path, f"start {time.time():.6f}")
        path = self.path

        def before(params: Any, context: Any, **_kwargs: Any) -> None:
            context["epochgc_keys"] = len(params["Delete"]["Objects"])

        def after(parsed: Any, context: Any, **_kwargs: Any) -> None:
            # Quiet mode lists only the keys that failed: the rest are gone.
            deleted = context.get("epochgc_keys", 0) - len(parsed.get("Errors", []))
            _append(path, f"delete {time.time():.6f} {deleted}")

        client.meta.events.register("before-parameter-build.s3.DeleteObjects", before)
        client.meta.events.register("after-call.s3.DeleteObjects", after)


def read_delete_log(path: Path) -> tuple[list[float], list[tuple[float, int]]]:
    """(task start times, (time, keys) of each DeleteObjects)."""
    starts: list[float] = []
    deletes: list[tuple[float, int]] = []
    for line in path.read_text().splitlines():
        kind, at, *rest = line.split()
        if kind == "start":
            starts.append(float(at))
        else:
            deletes.append((float(at), int(rest[0])))
    return starts, deletes


@dataclass(frozen=True)
class PauseAfterDeletes:
    """Pauses the collector right after the ``after``-th DeleteObjects of
    the whole job, the pause's write taking ``pause_delay_seconds`` (an
    operator's request on a slow link).

    An operator's pause is a moment: a batch whose gate read the control
    document before that moment may still go, one after it may not. In a
    job the pause would land at a random moment; here every other read of
    the control document made after the ``after``-th delete waits until the
    pause is written, so "after" means after, whatever the two Spark
    workers' timing (otherwise the other task's gate read could slip in
    between the delete and the pause's write and the test would measure
    scheduling, not the gate).
    """

    flag: str
    bucket: str
    root: str
    after: int = 1
    by: str = "dave"
    reason: str = "mid-job"
    pause_delay_seconds: float = 0.3

    def __call__(self, event: ClientCreated) -> None:
        client = event.client
        hook = self
        control_key = f"{hook.root}/gc/control.json"
        pausing = {"here": False}

        def deletes_so_far() -> int:
            try:
                return len(Path(hook.flag + ".count").read_text()) // 2
            except FileNotFoundError:
                return 0

        def before_control_read(params: Any = None, **_kwargs: Any) -> None:
            if pausing["here"] or not params or params.get("Key") != control_key:
                return
            if deletes_so_far() < hook.after:
                return
            deadline = time.monotonic() + 60
            while not Path(hook.flag + ".done").exists() and time.monotonic() < deadline:
                time.sleep(0.01)

        def after_call(**_kwargs: Any) -> None:
            _append(hook.flag + ".count", "d")
            if deletes_so_far() < hook.after:
                return
            try:
                fd = os.open(hook.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return  # another task paused already
            os.close(fd)
            from epochgc.gc.control import pause  # noqa: PLC0415
            from epochgc.storage.s3 import S3ObjectStore  # noqa: PLC0415

            pausing["here"] = True
            time.sleep(hook.pause_delay_seconds)
            pause(
                S3ObjectStore(client, hook.bucket),
                hook.root,
                by=hook.by,
                reason=hook.reason,
                now=datetime.now(UTC),
            )
            _append(hook.flag + ".done", "paused")

        client.meta.events.register("before-parameter-build.s3.GetObject", before_control_read)
        client.meta.events.register("after-call.s3.DeleteObjects", after_call)


@dataclass(frozen=True)
class FailBeforeDelete:
    nth: int
    message: str = "injected crash"

    def __call__(self, event: ClientCreated) -> None:
        client = event.client
        calls = [0]
        hook = self

        def before(**_kwargs: Any) -> None:
            calls[0] += 1
            if calls[0] >= hook.nth:
                raise RuntimeError(hook.message)

        client.meta.events.register("before-call.s3.DeleteObjects", before)


@dataclass(frozen=True)
class ExitBeforeDelete:
    nth: int

    def __call__(self, event: ClientCreated) -> None:
        client = event.client
        calls = [0]
        hook = self

        def before(**_kwargs: Any) -> None:
            calls[0] += 1
            if calls[0] >= hook.nth:
                os._exit(9)  # no finally, no atexit: as if the executor were killed

        client.meta.events.register("before-call.s3.DeleteObjects", before)


@dataclass(frozen=True)
class FailAtStart:
    def __call__(self, event: ClientCreated) -> None:
        raise ModuleNotFoundError("No module named 'epochgc'")


@dataclass(frozen=True)
class LimitMemory:
    """What ``spark.executor.pyspark.memory`` does to a Python worker
    (an address-space limit), for one task only, set once the task has
    fetched its data file, ``headroom`` bytes above what the worker then
    maps: reading the file fails (``ArrowMemoryError``). The limit is
    lifted when the task writes its record (its PUT at the end), so the
    reused worker serves later tasks normally."""

    partition: int
    headroom: int = 1 << 20

    def __call__(self, event: ClientCreated) -> None:
        client = event.client
        import resource  # noqa: PLC0415

        from pyspark import TaskContext  # noqa: PLC0415

        context = TaskContext.get()
        if context is None or context.partitionId() != self.partition:
            return
        old = resource.getrlimit(resource.RLIMIT_AS)
        headroom = self.headroom

        def limit(**_kwargs: Any) -> None:
            with open("/proc/self/status", encoding="ascii") as status:
                size = next(int(x.split()[1]) * 1024 for x in status if x.startswith("VmSize:"))
            resource.setrlimit(resource.RLIMIT_AS, (size + headroom, old[1]))

        def lift(**_kwargs: Any) -> None:
            resource.setrlimit(resource.RLIMIT_AS, old)

        client.meta.events.register("after-call.s3.GetObject", limit)
        client.meta.events.register("before-call.s3.PutObject", lift)
