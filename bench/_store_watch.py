"""Benchmark helper: the cluster's ownership and leadership as the bucket
shows them, read by the bench with its own client.

The nodes are processes of their own, so what they own and lead is
measured where it takes effect: the ownership records ``{root}/meta/
owners/...`` (who owns a partition, at which term, written when) and the
partition logs (a partition is led once its log's newest entry is at the
record's term: the leader's ``term_start``). Nothing is asked of the nodes.

Costs, since the embedded server serves one request at a time and the
nodes wait behind the bench's reads (and the bench behind theirs): a
records poll is one LIST page per 1000 records plus a GET of each record
whose ETag changed since it was read; a full logs poll is one LIST page
per 1000 log entries plus a GET of each new entry; ``probe_logs`` is one
GET per partition asked about (the entry after the newest one known).
``stats`` counts the bench's requests.

Times. A record carries ``updated_at``, its writer's wall clock when the
record was written; the nodes run on this machine, so that is the bench's
clock too. ``first_owned_at`` (start) and ``taken_over_at`` (failover) use
it: exact to the millisecond whatever the poll interval, where a poll only
says "by now". The write lands a request's latency after its
``updated_at``; the poll times bound that from above, and so do the
survivors' log lines that the take-over was answered.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from epochgc.errors import EpochGCError
from epochgc.leases.holder_codec import OwnerDocument, decode_owner
from epochgc.storage.keys import (
    PartitionId,
    encode_log_entry_key,
    nodes_prefix,
    owner_key,
    owners_prefix,
    parse_log_entry_key,
    parse_node_lease_key,
    parse_owner_key,
    parse_partition_meta_key,
    partition_log_prefix,
    partitions_prefix,
)
from epochgc.storage.object_store import get_or_none
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.partition.codec import decode_command

log = logging.getLogger("epochgc.bench")

READERS = 32
"""The bench's reads in flight. The embedded server shares itself out per
request: while 20 nodes open partitions (160 at once), 8 readers needed
over a minute to read 2,000 records, by which time leading was over."""


@dataclass(frozen=True)
class Seen:
    """One version of a record, and when the bench first saw it."""

    doc: OwnerDocument
    seen_at: float
    """Wall time at the end of the poll that first listed it."""


@dataclass
class StoreWatch:
    """Ownership records, node leases and partition log tails, polled.

    Example::

        watch = StoreWatch(store, stats, "epochgc", pids)
        watch.poll_records()
        watch.owned_by("node-03")      # partitions its records name
        watch.poll_logs()
        watch.led()                    # partitions led at their record's term
    """

    store: S3ObjectStore
    stats: RequestStats
    root: str
    partitions: frozenset[PartitionId]
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(READERS))
    records: dict[PartitionId, OwnerDocument] = field(default_factory=dict)
    """The newest version of each record read."""
    history: dict[PartitionId, list[Seen]] = field(default_factory=dict)
    """Every version read, oldest first."""
    nodes: set[str] = field(default_factory=set)
    """Node ids with a lease object at the last poll."""
    log_terms: dict[PartitionId, int] = field(default_factory=dict)
    """The term of each partition log's newest entry read."""
    log_tails: dict[PartitionId, int] = field(default_factory=dict)
    """The newest offset read of each partition log."""
    last_read: tuple[float, int] = (0.0, 0)
    """Seconds the last records poll took, and the records it read."""
    _etags: dict[PartitionId, str] = field(default_factory=dict)

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    # --- records ---------------------------------------------------------------------

    def poll_records(self, fetch: Callable[[PartitionId], bool] | None = None) -> None:
        """LIST the records; GET the ones that changed (of those ``fetch``
        accepts, to spare the server); LIST the nodes."""
        started = time.monotonic()
        listed: dict[PartitionId, str] = {}
        for page in self.store.list_pages(owners_prefix(self.root)):
            for info in page:
                pid = parse_owner_key(info.key, self.root)
                if pid is not None:
                    listed[pid] = info.etag
        changed = [
            p
            for p, etag in listed.items()
            if self._etags.get(p) != etag and (fetch is None or fetch(p))
        ]
        for pid, found in zip(changed, self.pool.map(self._read_record, changed), strict=True):
            if found is None:
                continue
            etag, doc = found
            self._etags[pid] = etag
            self.records[pid] = doc
            self.history.setdefault(pid, []).append(Seen(doc, time.time()))
        for pid in [p for p in self.records if p not in listed]:
            del self.records[pid]
            self._etags.pop(pid, None)
        self.nodes = {
            node
            for info in self.store.list_objects(nodes_prefix(self.root))
            if (node := parse_node_lease_key(info.key, self.root)) is not None
        }
        self.last_read = (time.monotonic() - started, len(changed))

    def _read_record(self, pid: PartitionId) -> tuple[str, OwnerDocument] | None:
        key = owner_key(self.root, pid)
        stored = get_or_none(self.store, key)
        if stored is None:
            return None
        return stored.etag, decode_owner(stored.body, key)

    def owned(self, live: Collection[str] | None = None) -> set[PartitionId]:
        """Partitions whose record names a node (not released), of ``live``
        when given."""
        return {
            p
            for p, d in self.records.items()
            if not d.released and (live is None or d.node in live)
        }

    def owned_by(self, node: str) -> set[PartitionId]:
        return {p for p, d in self.records.items() if d.node == node and not d.released}

    def loads(self, nodes: Iterable[str]) -> dict[str, int]:
        """Records held by each of ``nodes``."""
        counts = dict.fromkeys(nodes, 0)
        for doc in self.records.values():
            if not doc.released and doc.node in counts:
                counts[doc.node] += 1
        return counts

    def first_owned_at(self, pid: PartitionId) -> datetime | None:
        """``updated_at`` of the first held record read of ``pid``."""
        for seen in self.history.get(pid, []):
            if not seen.doc.released:
                return seen.doc.updated_at
        return None

    def taken_over_at(self, pid: PartitionId, victim: str, above_term: int) -> Seen | None:
        """The first version read of ``pid``'s record held by a node other
        than ``victim`` at a term above ``above_term`` (the victim's)."""
        for seen in self.history.get(pid, []):
            doc = seen.doc
            if not doc.released and doc.node != victim and doc.term > above_term:
                return seen
        return None

    # --- partition logs ---------------------------------------------------------------

    def poll_logs(self) -> None:
        """LIST every partition log; GET the newest entry of each log whose
        tail moved since the last poll (its term)."""
        tails: dict[PartitionId, int] = {}
        for page in self.store.list_pages(partitions_prefix(self.root)):
            for info in page:
                pid = parse_partition_meta_key(info.key, self.root)
                if pid is None or pid not in self.partitions:
                    continue
                offset = parse_log_entry_key(info.key, partition_log_prefix(self.root, pid))
                if offset is not None and offset > tails.get(pid, -1):
                    tails[pid] = offset
        moved = [(p, o) for p, o in tails.items() if self.log_tails.get(p) != o]
        for (pid, offset), term in zip(
            moved, self.pool.map(lambda m: self._entry_term(*m), moved), strict=True
        ):
            if term is not None:
                self.log_tails[pid] = offset
                self.log_terms[pid] = term

    def probe_logs(self, pids: Iterable[PartitionId]) -> None:
        """For each of ``pids``, GET the entries after the newest known one
        until there is none: one GET per partition that did not move."""

        def probe(pid: PartitionId) -> None:
            while True:
                offset = self.log_tails.get(pid, -1) + 1
                term = self._entry_term(pid, offset)
                if term is None:
                    return
                self.log_tails[pid] = offset
                self.log_terms[pid] = term

        list(self.pool.map(probe, list(pids)))

    def _entry_term(self, pid: PartitionId, offset: int) -> int | None:
        key = encode_log_entry_key(partition_log_prefix(self.root, pid), offset)
        try:
            stored = get_or_none(self.store, key)
            return None if stored is None else decode_command(stored.body, key).term
        except EpochGCError as err:
            log.warning("reading %s: %s", key, err)
            return None

    def led(self, live: Collection[str] | None = None) -> set[PartitionId]:
        """Partitions whose log's newest entry is at the term of a held
        record (of ``live`` when given): its owner has started leading."""
        return {
            p
            for p, d in self.records.items()
            if not d.released
            and (live is None or d.node in live)
            and self.log_terms.get(p) == d.term
        }
