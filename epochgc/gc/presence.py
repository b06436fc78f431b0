"""GC daemon presence documents: who is running, leader or standby.

The ``gc`` lease names only its holder, and ``{root}/gc/status.json`` is
written only by the leader, so standby daemons were invisible in the
bucket. Each daemon keeps ``{root}/gc/daemons/{node_id}`` (one PUT every
``refresh_seconds``, at start and on every change of role; PUTs cost money,
so not every second) and deletes it on a clean stop. A daemon that crashed
leaves its document behind; a reader calls it stale once it has not been
refreshed for ``STALE_AFTER_REFRESHES`` of its own refresh intervals, and
the GC leader's maintenance deletes it ``reports.dead_after_seconds`` later
(``gone_daemons``).

Format (version 1, unknown fields ignored, a newer ``v`` refused)::

    {"v": 1, "node": "gc-host-1", "holder": "gc-host-1/3f2a9c01d4e5",
     "role": "leader", "state": "running",
     "started_at": "2026-11-24T05:00:00Z", "updated_at": "2026-11-24T05:10:00Z",
     "refresh_seconds": 60.0, "metrics": "http://10.0.0.5:9464"}

``role`` is ``leader`` or ``standby``; ``metrics`` is ``null`` when the
daemon serves no metrics. Nothing decides anything from these documents:
they are for people (``epochgc gc status``).

``updated_at`` is the writing daemon's clock. One ahead of the reader's by
more than the skew margin (``epochgc.storage.stored_time``) gives an unknown age:
the document counts as stale, so a crashed daemon on a host whose clock
runs ahead does not look alive until its clock is reached.

The daemon's jobs that write and tidy them are ``gc.daemon.presence_jobs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from epochgc.errors import MalformedRecordError, RecordError
from epochgc.storage import documents
from epochgc.storage.keys import gc_daemon_key, gc_daemons_prefix
from epochgc.storage.object_store import ObjectStore, get_or_none
from epochgc.storage.stored_time import DEFAULT_MARGIN_SECONDS, stored_age_seconds

PRESENCE_VERSION = 1
STALE_AFTER_REFRESHES = 3
"""A document not refreshed for this many of its refresh intervals is
stale (its daemon crashed or cannot write)."""


@dataclass(frozen=True)
class PresenceDocument:
    """One daemon's presence.

    Example::

        doc = PresenceDocument("gc-a", "gc-a/3f2a", "standby", "running", t0, t0, 60.0)
        doc.is_stale(t0 + timedelta(minutes=5))   # True
    """

    node: str
    holder: str
    role: str
    state: str
    started_at: datetime
    updated_at: datetime
    refresh_seconds: float
    metrics: str | None = None

    def age_seconds(
        self, now: datetime, margin_seconds: float = DEFAULT_MARGIN_SECONDS
    ) -> float | None:
        """Seconds since the daemon last refreshed it (by ``now``'s clock);
        ``None`` when ``updated_at`` is from the future (unknown)."""
        return stored_age_seconds(self.updated_at, now, margin_seconds)

    def is_stale(self, now: datetime, margin_seconds: float = DEFAULT_MARGIN_SECONDS) -> bool:
        """Not refreshed for ``STALE_AFTER_REFRESHES`` refresh intervals, or
        of unknown age."""
        age = self.age_seconds(now, margin_seconds)
        return age is None or age > STALE_AFTER_REFRESHES * self.refresh_seconds


def gone_daemons(
    docs: Sequence[PresenceDocument],
    now: datetime,
    *,
    grace_seconds: float,
    keep: str,
    margin_seconds: float = DEFAULT_MARGIN_SECONDS,
) -> list[str]:
    """The nodes whose documents the GC leader may delete: stale for
    ``grace_seconds`` beyond the stale mark, never ``keep`` (the leader
    itself). A crashed daemon thus shows as stale in ``gc status`` for a
    while, then goes, so host names that never come back leave nothing.
    ``updated_at`` is the writer's wall clock: a daemon whose clock is far
    off (behind, or ahead by more than the margin: unknown age) may lose
    its document early; it rewrites it at its next refresh.
    """
    gone = []
    for d in docs:
        age = d.age_seconds(now, margin_seconds)
        limit = STALE_AFTER_REFRESHES * d.refresh_seconds + grace_seconds
        if d.node != keep and (age is None or age > limit):
            gone.append(d.node)
    return gone


def encode_presence(doc: PresenceDocument) -> bytes:
    """Presence document bytes."""
    return documents.dump_document(
        {
            "v": PRESENCE_VERSION,
            "node": doc.node,
            "holder": doc.holder,
            "role": doc.role,
            "state": doc.state,
            "started_at": documents.format_time(doc.started_at),
            "updated_at": documents.format_time(doc.updated_at),
            "refresh_seconds": doc.refresh_seconds,
            "metrics": doc.metrics,
        }
    )


def decode_presence(data: bytes, where: str) -> PresenceDocument:
    """Parse a presence document.

    Raises:
        MalformedRecordError, UnsupportedVersionError.
    """
    doc = documents.load_document(data, where, PRESENCE_VERSION)
    refresh = doc.get("refresh_seconds")
    if not isinstance(refresh, int | float) or isinstance(refresh, bool) or refresh <= 0:
        raise MalformedRecordError(f"{where}: 'refresh_seconds' must be a positive number")
    metrics: Any = doc.get("metrics")
    if metrics is not None and not isinstance(metrics, str):
        raise MalformedRecordError(f"{where}: 'metrics' must be a string or null")
    return PresenceDocument(
        node=documents.get_str(doc, "node", where),
        holder=documents.get_str(doc, "holder", where),
        role=documents.get_str(doc, "role", where),
        state=documents.get_str(doc, "state", where),
        started_at=documents.parse_time(documents.get_str(doc, "started_at", where), where),
        updated_at=documents.parse_time(documents.get_str(doc, "updated_at", where), where),
        refresh_seconds=float(refresh),
        metrics=metrics,
    )


def write_presence(store: ObjectStore, root: str, doc: PresenceDocument) -> None:
    """Publish ``doc`` (one PUT).

    Raises:
        StorageError: the store failed.
    """
    store.put(gc_daemon_key(root, doc.node), encode_presence(doc))


def delete_presence(store: ObjectStore, root: str, node_id: str) -> None:
    """Remove a daemon's document (a clean stop; one DELETE).

    Raises:
        StorageError: the store failed.
    """
    store.delete(gc_daemon_key(root, node_id))


def read_presences(store: ObjectStore, root: str) -> tuple[list[PresenceDocument], list[str]]:
    """Every daemon's document, by node, and the keys that could not be
    read (with why). One LIST plus one GET per daemon.

    Raises:
        StorageError: the store could not be listed (a missing bucket too:
            a LIST never answers "nothing written yet" with an error).
    """
    docs: list[PresenceDocument] = []
    unreadable: list[str] = []
    for info in store.list_objects(gc_daemons_prefix(root)):
        stored = get_or_none(store, info.key)
        if stored is None:
            continue  # its daemon stopped while we listed
        try:
            docs.append(decode_presence(stored.body, info.key))
        except RecordError as err:
            unreadable.append(f"{info.key}: {err}")
    return sorted(docs, key=lambda d: d.node), unreadable
