"""The record of every key a run deleted (docs/operating.md, "Why is this
object still there? gc explain"), so that an object that is gone can be
traced to the run that deleted it.

Each deleting run writes, beside its ``summary.json``, Parquet parts under
``{root}/gc/runs/{run_id}/deleted/`` (docs/contract.md): one row per key
DeleteObjects confirmed, with ``key``, ``size``, ``epoch``, ``shard`` and the
run's ``m``. The local engine writes one part, each Spark task attempt one
per ``RECORD_FLUSH_KEYS`` keys and one for the rest (``spark.tasks``);
readers take every object under ``deleted/`` as a part. Rows are streamed
to a temporary file as the batches are confirmed (the plan's machinery,
``plan_file``), never held in memory. A part goes with its
run when the daemon deletes runs older than ``gc.runs_retention_days``.
``gc.record_deletions = false`` turns it off.

``find_deletion`` searches the kept records for one key: the key's epoch
``e`` says no run with ``M < e`` deleted it, so it finds (by binary search
over the runs' summaries, ``M`` never falling over time) the first run
whose ``M`` reached ``e``, and reads the records of the runs from there on,
at most ``SEARCH_RUNS`` of them (and ``SEARCH_BACK`` before it).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from epochgc.errors import EpochGCError
from epochgc.extras import BASE, require
from epochgc.gc.plan_file import ParquetStream
from epochgc.gc.run_report import decode_summary, run_files
from epochgc.gc.sweeper import DeleteBatchDone
from epochgc.storage.keys import gc_run_deleted_key, gc_run_summary_key, parse_l0_key
from epochgc.storage.object_store import ObjectInfo, ObjectStore

log = logging.getLogger(__name__)

FIELDS = (
    ("key", "string"),
    ("size", "int64"),
    ("epoch", "int64"),
    ("shard", "int32"),
    ("m", "int64"),
)
SEARCH_RUNS = 200
"""Runs whose records ``find_deletion`` reads, from the first whose ``M``
reached the key's epoch: the deleting run is the first of them that listed
the key's shard, within ``gc.max_lag_seconds`` of ``M`` passing its epoch."""
SEARCH_BACK = 20
"""Runs read before that one too (see ``find_deletion``)."""


class DeletionRecord(ParquetStream):
    """One part of a run's deletion record, fed by the sweeper's
    ``DeleteBatchDone`` events from its deleting threads: a record, so a
    row it cannot write fails the sweep (the event channel lets the error
    through to the deleting thread).

    Example::

        with (
            DeletionRecord(root, m) as record,
            sweeper.events.subscribed(DeleteBatchDone, record.on_batch_done),
        ):
            sweeper.sweep(shards, m, now)
            if record.rows:
                record.upload(store, gc_run_deleted_key(root, run_id, 0))
    """

    def __init__(self, root: str, safe_epoch: int) -> None:
        super().__init__(FIELDS, "the record of deleted keys (gc.record_deletions)")
        self._root = root
        self._m = safe_epoch

    def add(self, batch: Sequence[ObjectInfo]) -> None:
        """Append the objects DeleteObjects confirmed (L0 keys of this root:
        the sweeper deletes nothing else)."""
        parsed = [parse_l0_key(o.key, self._root) for o in batch]
        self.write(
            [
                [o.key for o in batch],
                [o.size for o in batch],
                [-1 if p is None else p.epoch for p in parsed],
                [-1 if p is None else p.shard for p in parsed],
                [self._m] * len(batch),
            ]
        )

    def on_batch_done(self, event: DeleteBatchDone) -> None:
        """Subscriber: append the objects a DeleteObjects batch confirmed."""
        if event.deleted:
            self.add(event.deleted)


@contextmanager
def open_record(root: str, safe_epoch: int, *, on: bool) -> Iterator[DeletionRecord | None]:
    """A run's (or a Spark task's) deletion record to feed, or ``None``
    when ``on`` is false (records off, or a pass that deletes nothing)."""
    if not on:
        yield None
        return
    with DeletionRecord(root, safe_epoch) as record:
        yield record


@dataclass(frozen=True)
class DeletedKey:
    """One row of a deletion record, with its run."""

    run_id: str
    key: str
    size: int
    epoch: int
    shard: int
    m: int
    finished_at: datetime | None = None
    """When the run ended (from its summary; ``None`` when unreadable)."""


@dataclass(frozen=True)
class DeletionSearch:
    """What ``find_deletion`` found, and how far it looked."""

    found: DeletedKey | None
    runs_searched: int
    runs_kept: int
    """Runs with a deletion record in the bucket."""


def _read_part(store: ObjectStore, key: str, wanted: str | None) -> Iterator[dict[str, object]]:
    pq = require("pyarrow.parquet", BASE, "reading a deletion record")
    # One thread: a part is at most RECORD_FLUSH_KEYS-odd rows, and a CLI
    # process that started pyarrow's thread pool to decode it aborted at
    # exit about one time in a hundred ("terminate called without an
    # active exception", exit -6) after printing its answer.
    table = pq.read_table(io.BytesIO(store.get(key).body), use_threads=False)
    if wanted is not None:
        pc = require("pyarrow.compute", BASE, "reading a deletion record")
        table = table.filter(pc.equal(table["key"], wanted))
    for batch in table.to_batches():
        yield from batch.to_pylist()


def deleted_keys(store: ObjectStore, root: str, run_id: str) -> Iterator[DeletedKey]:
    """Every row of one run's deletion record, part by part.

    Raises:
        StorageError: a part could not be read.
    """
    prefix = gc_run_deleted_key(root, run_id, 0).rsplit("/", 1)[0] + "/"
    for info in store.list_objects(prefix):
        for row in _read_part(store, info.key, None):
            yield _row(run_id, row)


def _row(run_id: str, row: dict[str, object], finished_at: datetime | None = None) -> DeletedKey:
    return DeletedKey(
        run_id,
        str(row["key"]),
        int(row["size"]),  # type: ignore[call-overload]
        int(row["epoch"]),  # type: ignore[call-overload]
        int(row["shard"]),  # type: ignore[call-overload]
        int(row["m"]),  # type: ignore[call-overload]
        finished_at,
    )


def find_deletion(store: ObjectStore, root: str, key: str) -> DeletionSearch:
    """The kept record of ``key``'s deletion, if any (see the module
    docstring for how far it looks).

    Raises:
        StorageError: the runs could not be listed.
    """
    parsed = parse_l0_key(key, root)
    files = run_files(store, root)
    recorded = sorted(
        run_id for run_id, infos in files.items() if any("/deleted/" in i.key for i in infos)
    )
    if parsed is None or not recorded:
        return DeletionSearch(None, 0, len(recorded))
    summaries: dict[str, tuple[int, datetime] | None] = {}

    def summary(run_id: str) -> tuple[int, datetime] | None:
        if run_id not in summaries:
            try:
                s = decode_summary(store.get(gc_run_summary_key(root, run_id)).body)
                summaries[run_id] = (s.safe_epoch, s.finished_at)
            except EpochGCError as err:
                log.warning("run %s: summary unreadable: %s", run_id, err)
                summaries[run_id] = None
        return summaries[run_id]

    low, high = 0, len(recorded)
    while low < high:  # the first run whose M reached the key's epoch
        mid = (low + high) // 2
        read = summary(recorded[mid])
        if read is not None and read[0] >= parsed.epoch:
            high = mid
        else:
            low = mid + 1
    searched = 0
    # Run ids order runs by their start second only, and M may dip when two
    # collectors' views differ: look back a little too.
    for run_id in recorded[max(0, low - SEARCH_BACK) : low + SEARCH_RUNS]:
        searched += 1
        for info in files[run_id]:
            if "/deleted/" not in info.key:
                continue
            for row in _read_part(store, info.key, key):
                read = summary(run_id)
                return DeletionSearch(
                    _row(run_id, row, None if read is None else read[1]), searched, len(recorded)
                )
    return DeletionSearch(None, searched, len(recorded))
