"""The ``control`` job: the collector follows the operators' control
document (``{root}/gc/control.json``: pause, resume, reset).

The job reads the document, applies it to the collector and shows the
state in the metrics; what a change of state sets off in the daemon (stop
the sweep in progress, run the held jobs, trigger a round, publish the
status) is the daemon's, which subscribes to the ``CollectorStateChanged``
the job publishes. A document that cannot be read keeps the current state.
"""

from __future__ import annotations

from dataclasses import dataclass

from epochgc.events import Event, EventChannel
from epochgc.gc.collector import Collector
from epochgc.gc.control import CollectorState, read_control
from epochgc.gc.daemon.contacts import FAILED, StoreContacts
from epochgc.metrics.instruments import GcMetrics
from epochgc.storage.object_store import ObjectStore


@dataclass(frozen=True)
class CollectorStateChanged(Event):
    """The control document moved the collector from ``before`` to ``after``."""

    before: CollectorState
    after: CollectorState


@dataclass(eq=False)
class ControlPoll:
    """Reads the control document and applies it to the collector.

    Example::

        poll = ControlPoll(store, root, collector, metrics, contacts, events)
        poll()      # publishes CollectorStateChanged when the state changed
    """

    store: ObjectStore
    root: str
    collector: Collector
    metrics: GcMetrics
    contacts: StoreContacts
    events: EventChannel

    def __call__(self) -> None:
        read = self.contacts.attempt(
            "control",
            lambda: read_control(self.store, self.root),
            "could not read the gc control document (keeping state): %s",
        )
        if read is FAILED:
            return
        control, _etag = read
        before = self.collector.state
        self.collector.apply_control(control)
        after = self.collector.state
        self.metrics.set_state(after.value)
        if before is not after:
            self.events.publish(CollectorStateChanged(before, after))
