"""Parquet files a run streams beside its summary: a dry run's plan, and
a deleting run's record of the keys it deleted (``deletion_record``).

Rows arrive in batches and go straight into a Parquet writer on a local
temporary file, one row group per batch; nothing is kept per key in Python.
At the end the file is uploaded as one object. A plan's columns: ``key``,
``size``, and (local engine) the ``last_modified`` time (docs/contract.md,
"Bucket layout (layout 2)").

pyarrow is imported lazily: only runs that write such a file load it (with
its allocator's background thread).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Sequence
from typing import Any, Self

from epochgc.extras import BASE, require
from epochgc.gc.sweeper import ObjectsPlanned
from epochgc.storage.object_store import ObjectInfo, ObjectStore


class ParquetStream:
    """Rows in batches to a temporary Parquet file; ``upload`` puts it at a
    key. ``fields`` are ``(name, pyarrow type name)`` pairs (``string``,
    ``int64``, ``int32``, ``timestamp_ms``). Batches may come from several
    threads."""

    def __init__(self, fields: Sequence[tuple[str, str]], needed_by: str) -> None:
        pa = require("pyarrow", BASE, needed_by)
        pq = require("pyarrow.parquet", BASE, needed_by)
        self._pa = pa
        types = {
            "string": pa.string(),
            "int64": pa.int64(),
            "int32": pa.int32(),
            "timestamp_ms": pa.timestamp("ms", tz="UTC"),
        }
        self._schema = pa.schema([(name, types[kind]) for name, kind in fields])
        self._file = tempfile.TemporaryFile(prefix="epochgc-parquet-")  # noqa: SIM115 - closed by __exit__
        self._writer: Any = pq.ParquetWriter(self._file, self._schema)
        self._lock = threading.Lock()
        self.rows = 0

    @property
    def names(self) -> list[str]:
        return list(self._schema.names)

    def write(self, columns: Sequence[Sequence[Any]]) -> None:
        """Append one batch: one sequence per field, in the fields' order."""
        pa = self._pa
        arrays = [
            pa.array(list(values), field.type)
            for values, field in zip(columns, self._schema, strict=True)
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._schema)
        with self._lock:
            self._writer.write_batch(batch)
            self.rows += batch.num_rows

    def write_table(self, table: Any) -> None:
        """Append Arrow rows (selected and cast to this file's fields),
        without turning them into Python objects."""
        with self._lock:
            self._writer.write_table(table.select(self.names).cast(self._schema))
            self.rows += table.num_rows

    def upload(self, store: ObjectStore, key: str) -> str:
        """Finish the file and put it at ``key`` (the one moment the
        compressed file is in memory, as the body of a PUT).

        Raises:
            StorageError: the PUT failed.
        """
        with self._lock:
            self._writer.close()
        self._file.seek(0)
        store.put(key, self._file.read())
        return key

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._writer.is_open:
            self._writer.close()
        self._file.close()


class PlanWriter(ParquetStream):
    """A dry run's plan: ``key``, ``size`` and (local engine)
    ``last_modified`` of every object it would delete.

    Example::

        with (
            PlanWriter(with_last_modified=True) as plan,
            sweeper.events.subscribed(ObjectsPlanned, plan.on_planned),
        ):
            sweeper.sweep(shards, m, now, dry_run=True, plan=True)
            plan.upload(store, key)
    """

    def __init__(self, *, with_last_modified: bool) -> None:
        fields = [("key", "string"), ("size", "int64")]
        if with_last_modified:
            fields.append(("last_modified", "timestamp_ms"))
        super().__init__(fields, "a dry run's plan file (plan.parquet)")

    def add(self, batch: Sequence[ObjectInfo]) -> None:
        """Append one batch of planned objects."""
        columns: list[list[Any]] = [[o.key for o in batch], [o.size for o in batch]]
        if len(self.names) == 3:
            columns.append([o.last_modified for o in batch])
        self.write(columns)

    def on_planned(self, event: ObjectsPlanned) -> None:
        """Subscriber: append a sweep's next batch of planned objects (a
        record: a row it cannot write fails the sweep)."""
        self.add(event.objects)
