"""Finding a partition's unreconciled placeholders and fetching their
records from L0 with as few requests as possible.

``plan_fetches`` is pure: it groups the byte ranges of all placeholders by
L0 object and covers each object's ranges with one ranged GET (the chunks
of one partition in consecutive objects are rarely far apart, and one round
trip costs more than a few kilobytes of slack).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from epochgc.errors import CorruptLogError, L0UnreadableError, MalformedRecordError, NotFoundError
from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.l0_format import decode_records
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.partition.codec import RetainedPlaceholder, decode_command
from epochgc.watermarks.partition.commands import PlaceholderBatch, Placeholders
from epochgc.watermarks.partition.replica import PartitionReplica


@dataclass(frozen=True)
class PendingPlaceholder:
    """An accepted placeholder whose records are not (all) in L1."""

    log_offset: int
    first_record: int
    last_record: int
    epoch: int
    batches: tuple[PlaceholderBatch, ...]


@dataclass(frozen=True)
class RangeFetch:
    """One ranged GET covering every wanted chunk of one L0 object."""

    key: str
    first_byte: int
    last_byte: int


def plan_fetches(batches: Sequence[PlaceholderBatch]) -> list[RangeFetch]:
    """One covering byte range per L0 object, in first-use order."""
    spans: dict[str, tuple[int, int]] = {}
    for batch in batches:
        if batch.byte_length == 0:
            continue
        first, last = batch.byte_offset, batch.byte_offset + batch.byte_length - 1
        if batch.l0_key in spans:
            lo, hi = spans[batch.l0_key]
            spans[batch.l0_key] = (min(lo, first), max(hi, last))
        else:
            spans[batch.l0_key] = (first, last)
    return [RangeFetch(key, lo, hi) for key, (lo, hi) in spans.items()]


def pending_placeholders(
    replica: PartitionReplica, above_record: int, limit_records: int | None = None
) -> list[PendingPlaceholder]:
    """Accepted placeholders holding records above ``above_record``, in log
    order: whole placeholders, at most ``limit_records`` records unless the
    first one alone is larger.

    Raises:
        CorruptLogError: a retained placeholder's log entry is missing or
            is not a placeholder.
    """
    wanted: list[RetainedPlaceholder] = []
    total = 0
    for retained in replica.retained:
        if retained.last_record <= above_record:
            continue
        size = retained.last_record - retained.first_record + 1
        if limit_records is not None and wanted and total + size > limit_records:
            break
        wanted.append(retained)
        total += size
    if not wanted:
        return []
    first_offset, last_offset = wanted[0].log_offset, wanted[-1].log_offset
    read = replica.log.read(first_offset, limit=last_offset - first_offset + 1)
    by_offset = {entry.offset: entry.payload for entry in read.entries}
    pending = []
    for retained in wanted:
        payload = by_offset.get(retained.log_offset)
        if payload is None:
            raise CorruptLogError(
                f"placeholder at log offset {retained.log_offset} of "
                f"{replica.topic}/{replica.partition} is missing from the log"
            )
        command = decode_command(payload, replica.log.key_of(retained.log_offset))
        if not isinstance(command, Placeholders):
            raise CorruptLogError(f"log offset {retained.log_offset} is not a placeholder")
        pending.append(
            PendingPlaceholder(
                retained.log_offset,
                retained.first_record,
                retained.last_record,
                command.epoch,
                command.batches,
            )
        )
    return pending


def fetch_records(
    store: ObjectStore,
    placeholders: Sequence[PendingPlaceholder],
    *,
    concurrency: int = 8,
    runtime: Runtime = SYSTEM,
) -> list[bytes]:
    """The records of ``placeholders`` in record-offset order.

    Raises:
        L0UnreadableError: an L0 object is gone (deleted by hand, or not yet
            replicated) or a chunk does not hold what its placeholder says;
            it names the first placeholder concerned.
    """
    batches = [b for p in placeholders for b in p.batches]
    fetches = plan_fetches(batches)

    def first_needing(key: str) -> PendingPlaceholder:
        return next(p for p in placeholders if any(b.l0_key == key for b in p.batches))

    def get(fetch: RangeFetch) -> tuple[str, int, bytes]:
        try:
            body = store.get(fetch.key, byte_range=(fetch.first_byte, fetch.last_byte)).body
        except NotFoundError as err:
            owner = first_needing(fetch.key)
            raise L0UnreadableError(
                "missing", fetch.key, owner.first_record, owner.last_record, str(err)
            ) from err
        return fetch.key, fetch.first_byte, body

    got = runtime.run_requests(
        max(1, min(concurrency, len(fetches) or 1)), "epochgc-l0-fetch", get, fetches
    )
    fetched = {key: (start, body) for key, start, body in got}
    records: list[bytes] = []
    for placeholder in placeholders:
        for batch in placeholder.batches:
            start, body = fetched[batch.l0_key]
            begin = batch.byte_offset - start
            chunk = body[begin : begin + batch.byte_length]
            try:
                records.extend(decode_records(chunk, expected=batch.records))
            except MalformedRecordError as err:
                raise L0UnreadableError(
                    "corrupt",
                    batch.l0_key,
                    placeholder.first_record,
                    placeholder.last_record,
                    str(err),
                ) from err
    return records
