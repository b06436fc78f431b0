"""The operators of the simulated cluster, on the product's own code, at
the times the fault schedule says:

* ``epochgc gc pause`` and ``gc resume`` (``operator_pause``:
  ``gc.control.pause`` / ``resume``, a compare-and-swap of the control
  document); pauses that overlap are two operators racing (the first
  one's resume ends the second's pause early);
* ``epochgc controller compact`` (``compaction``: ``Controller.compact``,
  unguarded by the pause, as the command is);
* ``epochgc topic delete`` and ``topic create`` (``topic_race``:
  ``Controller.delete_topic`` / ``create_topic``): one operator deletes a
  topic and creates it again while a second deletes it too, the second's
  requests landing late, so that its delete, naming the revision it read
  before the recreate, may land after it.

A command whose requests fail is tried again every second until it
lands, as a person at a terminal would; one the controller refuses (the
topic is gone already, or exists) is not."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from epochgc.errors import EpochGCError, TopicExistsError, TopicNotFoundError
from epochgc.gc.control import pause, resume
from epochgc.runtime import Runtime
from epochgc.simulate.virtual_time import Process
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller

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
        self._controller = Controller(store, world.root, runtime=runtime)

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

    def recreate_topic(self, name: str, partitions: int, who: str) -> None:
        """``topic delete NAME`` then ``topic create NAME``."""
        self.delete_topic(name, who)
        self._until_done(
            f"{who}: topic create {name}",
            lambda: f"revision {self._controller.create_topic(name, partitions).revision}",
        )

    def compact_controller(self) -> None:
        """``controller compact`` (``--min-entries 1``)."""
        self._until_done(
            "topic-operator: controller compact",
            lambda: f"{self._controller.compact(min_entries=1)}",
        )

    def delete_topic(self, name: str, who: str) -> None:
        """``topic delete NAME``."""
        self._until_done(
            f"{who}: topic delete {name}", lambda: self._controller.delete_topic(name).describe()
        )

    def _until_done(self, what: str, command: Callable[[], object]) -> None:
        while True:
            try:
                done = command()
            except (TopicNotFoundError, TopicExistsError) as err:
                self._world.note(f"{what} refused: {err}")
                return
            except EpochGCError as err:
                self._world.note(f"{what} failed: {err}")
                self._runtime.sleep(RETRY_SECONDS)
                continue
            self._world.note(f"{what} done" + (f": {done}" if isinstance(done, str) else ""))
            return
