"""Test-only: reads the footer index an L0 object ends with.

The product writes the footer (for tools that look at an L0 object without
the partition logs) and never reads it back; tests read it to check that
what the writer puts there matches the chunks.
"""

from __future__ import annotations

import json
import struct

from epochgc.storage.l0_format import FOOTER_VERSION, MAGIC, ChunkRef

_LENGTH = struct.Struct(">I")


def read_footer(body: bytes) -> list[ChunkRef]:
    """The chunk index of a whole L0 object, as its footer states it."""
    assert body.endswith(MAGIC), "not an L0 object: trailing magic missing"
    footer_end = len(body) - len(MAGIC) - _LENGTH.size
    (footer_length,) = _LENGTH.unpack_from(body, footer_end)
    doc = json.loads(body[footer_end - footer_length : footer_end].decode("utf-8"))
    assert doc["v"] == FOOTER_VERSION
    return [
        ChunkRef(c["topic"], c["partition"], c["offset"], c["length"], c["records"])
        for c in doc["chunks"]
    ]
