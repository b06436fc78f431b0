"""The daemon's presence jobs: ``PresenceRefresh`` (the ``presence`` job of
every daemon: writes its ``{root}/gc/daemons/{node_id}``) and
``PresenceTidy`` (part of the leader's ``maintenance`` job: deletes the
documents of daemons gone for ``reports.dead_after_seconds``). Both read the
time from the clock the daemon is given. The document itself is
``gc.presence``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime

from epochgc.errors import EpochGCError
from epochgc.gc.daemon.contacts import FAILED, StoreContacts
from epochgc.gc.daemon.maintenance import tidying_pass
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.presence import (
    PresenceDocument,
    delete_presence,
    gone_daemons,
    read_presences,
    write_presence,
)
from epochgc.metrics.instruments import GcMetrics
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.stored_time import find_future

log = logging.getLogger(__name__)


@dataclass(eq=False)
class PresenceRefresh:
    """The ``presence`` job: write this daemon's presence document.

    Writes are serialised and the role is read inside the lock, so the last
    write shows the current role (the ``lease`` job calls
    ``refresh_if_role_changed`` soon after every change of role).
    ``describe`` tells this daemon's role, collector state and metrics URL.

    Example::

        refresh = PresenceRefresh(store, root, "gc-a", "gc-a/3f2a", 60.0, describe, ...)
        refresh()               # one PUT
        refresh.delete_own()    # a clean stop
    """

    store: ObjectStore
    root: str
    node_id: str
    holder: str
    refresh_seconds: float
    describe: Callable[[], tuple[str, str, str | None]]
    _: KW_ONLY
    contacts: StoreContacts
    stopping: threading.Event
    now: Callable[[], datetime]
    started_at: datetime = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _role: str | None = field(default=None, init=False)
    """The role the document last showed (None: not written)."""

    def __post_init__(self) -> None:
        self.started_at = self.now()

    def __call__(self) -> None:
        with self._lock:
            if self.stopping.is_set():
                return
            role, state, metrics = self.describe()
            doc = PresenceDocument(
                node=self.node_id,
                holder=self.holder,
                role=role,
                state=state,
                started_at=self.started_at,
                updated_at=self.now(),
                refresh_seconds=self.refresh_seconds,
                metrics=metrics,
            )
            written = self.contacts.attempt(
                "presence",
                lambda: write_presence(self.store, self.root, doc),
                "could not write this daemon's presence document: %s",
            )
            if written is not FAILED:
                self._role = role

    def refresh_if_role_changed(self) -> None:
        """Write now if the role changed since the last write."""
        if self._role not in (None, self.describe()[0]):
            self()

    def delete_own(self) -> None:
        """Delete this daemon's document (a clean stop), after any write in
        flight; a failure is logged (a leader tidies it later)."""
        try:
            with self._lock:
                delete_presence(self.store, self.root, self.node_id)
        except EpochGCError as err:
            log.warning("could not delete this daemon's presence document: %s", err)


@dataclass(eq=False)
class PresenceTidy:
    """Deletes the presence documents of daemons gone for good
    (``gone_daemons``), through the tidying job's guarded store: a pause
    stops it too. Never raises for store trouble: the next pass retries.

    Example::

        tidy = PresenceTidy(store, tidy_store, root, "gc-a", 600.0, ...)
        tidy()
    """

    store: ObjectStore
    tidy_store: ObjectStore
    root: str
    keep: str
    grace_seconds: float
    _: KW_ONLY
    margin_seconds: float
    future_log: FutureTimeLog
    metrics: GcMetrics
    """Counts each document deleted (``maintenance_deleted{kind="presence"}``)."""
    now: Callable[[], datetime]

    def __call__(self) -> None:
        tidying_pass(
            self._tidy,
            held="tidying of presence documents held: %s",
            failed="tidying daemon presence documents failed (retried next time): %s",
        )

    def _tidy(self) -> None:
        docs, _unreadable = read_presences(self.store, self.root)
        now = self.now()
        found = (
            find_future("presence", d.holder, "updated_at", d.updated_at, now, self.margin_seconds)
            for d in docs
        )
        self.future_log.note(f for f in found if f is not None)
        gone = gone_daemons(
            docs,
            now,
            grace_seconds=self.grace_seconds,
            keep=self.keep,
            margin_seconds=self.margin_seconds,
        )
        for node in gone:
            delete_presence(self.tidy_store, self.root, node)
            log.info("deleted the presence document of gone daemon %s", node)
            self.metrics.maintenance_deleted.labels("presence").inc()
