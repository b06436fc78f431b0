"""Test-only: a whole inventory data file read in memory.

An inventory task copies a data file to local disk with
``download_data_file`` (which checks its MD5) and streams it with
``iter_data_batches``; tests and the parsing benchmark hold the bytes
already, so this does the same two steps on them.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

from epochgc.errors import InventoryError
from epochgc.storage.inventory import (
    NORMALISED,
    InventoryFile,
    InventoryManifest,
    iter_data_batches,
)


def read_data_file(data: bytes, manifest: InventoryManifest, entry: InventoryFile) -> pa.Table:
    """A whole data file in memory as one normalised table.

    Raises:
        InventoryError: MD5 mismatch or unreadable contents.
    """
    actual = hashlib.md5(data, usedforsecurity=False).hexdigest()
    if actual != entry.md5.lower():
        raise InventoryError(f"{entry.key}: MD5 {actual} does not match the manifest's")
    tables = list(iter_data_batches(pa.BufferReader(data), manifest, entry))
    if not tables:
        return NORMALISED.empty_table()
    return pa.concat_tables(tables)
