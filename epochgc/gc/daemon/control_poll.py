"""The ``control`` job: the collector follows the operators' control
document (``{root}/gc/control.json``: pause, resume, reset).

The job reads the document, applies it to the collector and shows the
state in the metrics; what a change of state sets off in the daemon (stop
the sweep in progress, run the held jobs, trigger a round, publish the
status) is the daemon's, given here as ``on_change``. A document that
cannot be read keeps the current state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from epochgc.errors import EpochGCError
from epochgc.gc.collector import Collector
from epochgc.gc.control import CollectorState, read_control
from epochgc.gc.daemon.contacts import StoreContacts
from epochgc.metrics.instruments import GcMetrics
from epochgc.storage.object_store import ObjectStore

log = logging.getLogger("epochgc.gc.daemon")  # the daemon's log lines keep their logger


class ControlPoll:
    """Reads the control document and applies it to the collector.

    Example::

        poll = ControlPoll(store, root, collector, metrics, contacts, on_change)
        poll()      # on_change(before, after) when the state changed
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        collector: Collector,
        metrics: GcMetrics,
        contacts: StoreContacts,
        on_change: Callable[[CollectorState, CollectorState], None],
    ) -> None:
        self._store = store
        self._root = root
        self._collector = collector
        self._metrics = metrics
        self._contacts = contacts
        self._on_change = on_change

    def __call__(self) -> None:
        try:
            control, _etag = read_control(self._store, self._root)
        except EpochGCError as err:
            self._contacts.record("control", err)
            log.warning("could not read the gc control document (keeping state): %s", err)
            return
        self._contacts.record("control")
        before = self._collector.state
        self._collector.apply_control(control)
        after = self._collector.state
        self._metrics.set_state(after.value)
        if before is not after:
            self._on_change(before, after)
