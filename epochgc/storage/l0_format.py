"""The byte layout of L0 and L1 objects. Pure.

An L0 object holds record batches of many partitions, one chunk per
partition, followed by a footer index so that any tool can find the chunks
without the partition logs::

    [chunk 0][chunk 1]...[footer JSON][footer length: u32 BE]["EGL0"]

A chunk is its records, each framed as ``u32 BE length`` + bytes; the
placeholder that points at a chunk carries its byte offset, byte length and
record count, so a reconciler fetches exactly that range. An L1 object is a
single chunk (the records of one partition, in offset order).

Decoders raise ``MalformedRecordError`` on anything that does not add up;
they never return partial data as if it were whole.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from epochgc.errors import MalformedRecordError

MAGIC = b"EGL0"
FOOTER_VERSION = 1
_LENGTH = struct.Struct(">I")
MAX_RECORD_BYTES = 2**31


@dataclass(frozen=True)
class ChunkRef:
    """Where one partition's records sit in an L0 object."""

    topic: str
    partition: int
    byte_offset: int
    byte_length: int
    records: int


def encode_records(records: Sequence[bytes]) -> bytes:
    """Frame records as ``u32 BE length`` + bytes each."""
    parts = []
    for record in records:
        if len(record) >= MAX_RECORD_BYTES:
            raise ValueError(f"record of {len(record)} bytes is too large")
        parts.append(_LENGTH.pack(len(record)))
        parts.append(record)
    return b"".join(parts)


def decode_records(data: bytes, expected: int | None = None) -> list[bytes]:
    """Split a chunk into its records.

    Raises:
        MalformedRecordError: a frame runs past the end, or the count is not
            ``expected``.
    """
    records = []
    position = 0
    end = len(data)
    while position < end:
        if position + _LENGTH.size > end:
            raise MalformedRecordError(f"truncated record header at byte {position}")
        (length,) = _LENGTH.unpack_from(data, position)
        position += _LENGTH.size
        if position + length > end:
            raise MalformedRecordError(
                f"record at byte {position} claims {length} bytes, {end - position} left"
            )
        records.append(data[position : position + length])
        position += length
    if expected is not None and len(records) != expected:
        raise MalformedRecordError(f"chunk holds {len(records)} records, expected {expected}")
    return records


def build_l0_object(
    chunks: Sequence[tuple[str, int, Sequence[bytes]]],
) -> tuple[bytes, list[ChunkRef]]:
    """Lay out one L0 object; return its bytes and the chunk index.

    Raises:
        ValueError: an empty chunk list or a partition with no records.
    """
    if not chunks:
        raise ValueError("an L0 object needs at least one chunk")
    body = bytearray()
    index: list[ChunkRef] = []
    for topic, partition, records in chunks:
        if not records:
            raise ValueError(f"chunk for {topic}/{partition} has no records")
        encoded = encode_records(records)
        index.append(ChunkRef(topic, partition, len(body), len(encoded), len(records)))
        body += encoded
    footer = json.dumps(
        {
            "v": FOOTER_VERSION,
            "chunks": [
                {
                    "topic": c.topic,
                    "partition": c.partition,
                    "offset": c.byte_offset,
                    "length": c.byte_length,
                    "records": c.records,
                }
                for c in index
            ],
        },
        separators=(",", ":"),
    ).encode("utf-8")
    body += footer + _LENGTH.pack(len(footer)) + MAGIC
    return bytes(body), index
