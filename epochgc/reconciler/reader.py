"""Reading a partition back: from L1 at or below ``lro``, and through the
placeholders (L0 byte ranges) above it.

Used to verify that every acknowledged record is readable, in order, with
no gap and no duplicate, whichever process reconciled it and whenever.
L1 objects above ``lro`` (written by a pass that crashed before recording
its progress) are ignored; where two L1 objects cover an offset (a pass
that was redone), either holds the same records. Records an operator
recorded as lost (``partition skip``) raise ``RecordsLostError``: a reader
is never handed a silent gap.
"""

from __future__ import annotations

from collections.abc import Mapping

from epochgc.errors import CorruptLogError, RecordsLostError
from epochgc.reconciler.fetch import fetch_records, pending_placeholders
from epochgc.storage import documents
from epochgc.storage.keys import (
    L1Key,
    PartitionId,
    encode_l1_key,
    parse_l1_key,
    partition_l1_prefix,
)
from epochgc.storage.l0_format import decode_records
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.replica import PartitionReplica


class PartitionReader:
    """Reads records of one partition by offset.

    Example::

        reader = PartitionReader(store, "epochgc")
        records = reader.read("orders", 0, from_offset=0)
    """

    def __init__(self, store: ObjectStore, root: str) -> None:
        self._store = store
        self._root = root

    def read(
        self, topic: str, partition: int, from_offset: int = 0, *, revision: int | None = None
    ) -> list[tuple[int, bytes]]:
        """Every record from ``from_offset`` to the end, as (offset, record),
        of the live incarnation of ``topic`` (or of ``revision`` when given).

        Raises:
            TopicNotFoundError: no live topic of that name or partition.
            RecordsLostError: a record from ``from_offset`` on was recorded
                as lost.
            CorruptLogError: a gap in L1 below ``lro``.
            L0UnreadableError: an L0 object a placeholder needs is gone.
        """
        if revision is None:
            pid = Controller(self._store, self._root).topic(topic).partition_id(partition)
        else:
            pid = PartitionId(topic, revision, partition)
        return self.read_partition(pid, from_offset)

    def read_partition(self, pid: PartitionId, from_offset: int = 0) -> list[tuple[int, bytes]]:
        """Every record of one partition incarnation from ``from_offset``.

        Raises:
            RecordsLostError: a record from ``from_offset`` on was recorded
                as lost.
            CorruptLogError: a gap in L1 below ``lro``.
            L0UnreadableError: an L0 object a placeholder needs is gone.
        """
        replica = PartitionReplica(self._store, self._root, pid)
        state = replica.open()
        start = max(from_offset, state.start_offset)
        for lost in replica.lost:
            if lost.last >= start:
                raise RecordsLostError(
                    f"{pid}: records {lost.first}..{lost.last} were recorded as lost at "
                    f"{documents.format_time(lost.ts)} by {lost.by}: {lost.reason}",
                    pid,
                    lost,
                )
        out = self._read_l1(pid, start, state.lro)
        above = max(start - 1, state.lro)
        pending = pending_placeholders(replica, above)
        records = fetch_records(self._store, pending)
        offset = pending[0].first_record if pending else above + 1
        for record in records:
            if offset >= start:
                out.append((offset, record))
            offset += 1
        return out

    def _read_l1(self, pid: PartitionId, start: int, lro: int) -> list[tuple[int, bytes]]:
        if start > lro:
            return []
        prefix = partition_l1_prefix(self._root, pid)
        objects = [
            parsed
            for info in self._store.list_objects(prefix)
            if (parsed := parse_l1_key(info.key, self._root)) is not None
            and parsed.last_offset >= start
            and parsed.last_offset <= lro
        ]
        out: list[tuple[int, bytes]] = []
        offset = start
        while offset <= lro:
            best = _covering(objects, offset)
            if best is None:
                raise CorruptLogError(f"{pid}: no L1 object holds offset {offset} (lro {lro})")
            key = encode_l1_key(
                self._root, pid, best.first_offset, best.last_offset, best.object_id
            )
            records = decode_records(
                self._store.get(key).body, expected=best.last_offset - best.first_offset + 1
            )
            for position, record in enumerate(records):
                record_offset = best.first_offset + position
                if record_offset >= offset:
                    out.append((record_offset, record))
            offset = best.last_offset + 1
        return out


def _covering(objects: list[L1Key], offset: int) -> L1Key | None:
    candidates = [o for o in objects if o.first_offset <= offset <= o.last_offset]
    return max(candidates, key=lambda o: o.last_offset, default=None)


def check_read_back(
    where: str, acked: Mapping[int, object], stored: Mapping[int, object]
) -> tuple[int, str | None]:
    """How many acknowledged records (offset -> record) read back as they
    were written, and a one-line problem naming the first one that did not
    (``None`` when all did). The demo and ``epochgc verify`` both ask this."""
    wrong = [offset for offset, record in acked.items() if stored.get(offset) != record]
    if not wrong:
        return len(acked), None
    return len(acked) - len(wrong), (
        f"{where}: {len(wrong)} acknowledged records missing or different "
        f"(first at offset {min(wrong)})"
    )
