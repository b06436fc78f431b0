"""A dry run's plan, written as Parquet while the sweep runs.

Eligible objects arrive in batches (``Sweeper``'s ``PlanSink``) and go
straight into a Parquet writer on a local temporary file, one row group per
batch; nothing is kept per key in Python. At the end the file is uploaded
as one object. Its columns: ``key``, ``size``, and (local engine) the
``last_modified`` time (docs/contract.md, "Bucket layout (layout 2)").

pyarrow is imported lazily: only dry runs write a plan, and pyarrow (with
its allocator's background thread) has no business in every daemon.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

from epochgc.extras import SPARK, require
from epochgc.storage.object_store import ObjectInfo, ObjectStore


class PlanWriter:
    """Streams plan batches to a temporary Parquet file; ``upload`` puts it
    at ``key``.

    Example::

        with PlanWriter(with_last_modified=True) as plan:
            sweeper.sweep(shards, m, now, dry_run=True, plan_sink=plan.add)
            plan.upload(store, key)
    """

    def __init__(self, *, with_last_modified: bool) -> None:
        pa = require("pyarrow", SPARK, "a dry run's plan file (plan.parquet)")
        pq = require("pyarrow.parquet", SPARK, "a dry run's plan file (plan.parquet)")

        self._pa = pa
        fields = [("key", pa.string()), ("size", pa.int64())]
        if with_last_modified:
            fields.append(("last_modified", pa.timestamp("ms", tz="UTC")))
        self._schema = pa.schema(fields)
        self._file = tempfile.TemporaryFile(prefix="epochgc-plan-")  # noqa: SIM115 - closed by __exit__
        self._writer: Any = pq.ParquetWriter(self._file, self._schema)
        self.rows = 0

    def add(self, batch: Sequence[ObjectInfo]) -> None:
        """Append one batch of planned objects (not thread-safe: the sweeper
        calls its sink one batch at a time)."""
        pa = self._pa
        columns: list[Any] = [
            pa.array([o.key for o in batch], pa.string()),
            pa.array([o.size for o in batch], pa.int64()),
        ]
        if len(self._schema) == 3:
            columns.append(pa.array([o.last_modified for o in batch], pa.timestamp("ms", tz="UTC")))
        self._writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=self._schema))
        self.rows += len(batch)

    def add_table(self, table: Any) -> None:
        """Append Arrow rows (an inventory task's eligible rows: ``key``,
        ``size``, and ``last_modified`` when this plan has it), without
        turning them into Python objects."""
        names = self._schema.names
        self._writer.write_table(table.select(names).cast(self._schema))
        self.rows += table.num_rows

    def upload(self, store: ObjectStore, key: str) -> str:
        """Finish the file and put it at ``key`` (the one moment the
        compressed plan is in memory, as the body of a PUT).

        Raises:
            StorageError: the PUT failed.
        """
        self._writer.close()
        self._file.seek(0)
        store.put(key, self._file.read())
        return key

    def __enter__(self) -> PlanWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._writer.is_open:
            self._writer.close()
        self._file.close()
