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
from datetime import datetime

from epochgc.errors import EpochGCError
from epochgc.gc.control import CollectorPausedError
from epochgc.gc.daemon.contacts import StoreContacts
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.presence import (
    PresenceDocument,
    delete_presence,
    gone_daemons,
    read_presences,
    write_presence,
)
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.stored_time import find_future

log = logging.getLogger("epochgc.gc.daemon")  # the daemon's log lines keep their logger


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

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        node_id: str,
        holder: str,
        refresh_seconds: float,
        describe: Callable[[], tuple[str, str, str | None]],
        *,
        contacts: StoreContacts,
        stopping: threading.Event,
        now: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._root = root
        self._node_id = node_id
        self._holder = holder
        self._refresh_seconds = refresh_seconds
        self._describe = describe
        self._contacts = contacts
        self._stopping = stopping
        self._now = now
        self._lock = threading.Lock()
        self._role: str | None = None
        """The role the document last showed (None: not written)."""
        self.started_at = now()

    def __call__(self) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            role, state, metrics = self._describe()
            doc = PresenceDocument(
                node=self._node_id,
                holder=self._holder,
                role=role,
                state=state,
                started_at=self.started_at,
                updated_at=self._now(),
                refresh_seconds=self._refresh_seconds,
                metrics=metrics,
            )
            try:
                write_presence(self._store, self._root, doc)
            except EpochGCError as err:
                self._contacts.record("presence", err)
                log.warning("could not write this daemon's presence document: %s", err)
                return
            self._role = role
            self._contacts.record("presence")

    def refresh_if_role_changed(self) -> None:
        """Write now if the role changed since the last write."""
        if self._role not in (None, self._describe()[0]):
            self()

    def delete_own(self) -> None:
        """Delete this daemon's document (a clean stop), after any write in
        flight; a failure is logged (a leader tidies it later)."""
        try:
            with self._lock:
                delete_presence(self._store, self._root, self._node_id)
        except EpochGCError as err:
            log.warning("could not delete this daemon's presence document: %s", err)


class PresenceTidy:
    """Deletes the presence documents of daemons gone for good
    (``gone_daemons``), through the tidying job's guarded store: a pause
    stops it too. Never raises for store trouble: the next pass retries.

    Example::

        tidy = PresenceTidy(store, tidy_store, root, "gc-a", 600.0, ...)
        tidy()
    """

    def __init__(
        self,
        store: ObjectStore,
        tidy_store: ObjectStore,
        root: str,
        keep: str,
        grace_seconds: float,
        *,
        margin_seconds: float,
        future_log: FutureTimeLog,
        on_deleted: Callable[[], None],
        now: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._tidy_store = tidy_store
        self._root = root
        self._keep = keep
        self._grace_seconds = grace_seconds
        self._margin = margin_seconds
        self._future_log = future_log
        self._on_deleted = on_deleted
        self._now = now

    def __call__(self) -> None:
        try:
            docs, _unreadable = read_presences(self._store, self._root)
            now = self._now()
            found = (
                find_future("presence", d.holder, "updated_at", d.updated_at, now, self._margin)
                for d in docs
            )
            self._future_log.note(f for f in found if f is not None)
            gone = gone_daemons(
                docs,
                now,
                grace_seconds=self._grace_seconds,
                keep=self._keep,
                margin_seconds=self._margin,
            )
            for node in gone:
                delete_presence(self._tidy_store, self._root, node)
                log.info("deleted the presence document of gone daemon %s", node)
                self._on_deleted()
        except CollectorPausedError as err:
            log.info("tidying of presence documents held: %s", err)
        except EpochGCError as err:
            log.warning("tidying daemon presence documents failed (retried next time): %s", err)
