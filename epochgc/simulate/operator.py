"""The operator of the simulated cluster: ``epochgc gc pause`` and ``gc
resume`` at the times the fault schedule says (``operator_pause``), on
the product's own code (``gc.control.pause`` / ``resume``: a
compare-and-swap of the control document). Each is tried again every
second until it lands, as a person at a terminal would; pauses that
overlap are two operators racing (the first one's resume ends the
second's pause early)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from epochgc.errors import EpochGCError
from epochgc.gc.control import ControlDocument, pause, resume
from epochgc.runtime import Runtime
from epochgc.simulate.virtual_time import Process
from epochgc.storage.object_store import ObjectStore

if TYPE_CHECKING:
    from epochgc.simulate.cluster import World

RETRY_SECONDS = 1.0


class SimOperator:
    """One operator process; each pause runs as a task of its own."""

    def __init__(self, world: World, runtime: Runtime, store: ObjectStore, process: Process):
        self.process = process
        self._world = world
        self._runtime = runtime
        self._store = store

    def pause_for(self, seconds: float, who: str) -> None:
        """Pause, wait ``seconds``, resume."""
        root = self._world.root
        self._until_done(
            f"{who}: gc pause",
            lambda: pause(self._store, root, by=who, reason="simulated", now=self._runtime.wall()),
        )
        self._runtime.sleep(seconds)
        self._until_done(
            f"{who}: gc resume",
            lambda: resume(self._store, root, by=who, now=self._runtime.wall()),
        )

    def _until_done(self, what: str, command: Callable[[], ControlDocument]) -> None:
        while True:
            try:
                command()
            except EpochGCError as err:
                self._world.note(f"{what} failed: {err}")
                self._runtime.sleep(RETRY_SECONDS)
                continue
            self._world.note(f"{what} done")
            return
