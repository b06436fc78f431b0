"""Test-only: a store wrapper that lets the first read of the collector's
control document through unchanged and then pauses the collector, so the
next read (the check before the deleting stage) finds it paused: an
operator's ``gc pause`` landing between a round's stages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from epochgc.gc.control import pause
from epochgc.storage.keys import gc_control_key
from epochgc.storage.object_store import StoredObject
from tests.support.wrapping import StoreWrapper


class PauseAfterFirstControlRead(StoreWrapper):
    """Wraps an ``ObjectStore``; every call but ``get`` goes straight through."""

    def __init__(self, store: Any, root: str, *, by: str, reason: str) -> None:
        super().__init__(store)
        self._root = root
        self._by = by
        self._reason = reason
        self.control_reads = 0

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None) -> StoredObject:
        if key != gc_control_key(self._root):
            return self._store.get(key, byte_range=byte_range)  # type: ignore[no-any-return]
        self.control_reads += 1
        try:
            return self._store.get(key, byte_range=byte_range)  # type: ignore[no-any-return]
        finally:
            if self.control_reads == 1:
                pause(
                    self._store, self._root, by=self._by, reason=self._reason, now=datetime.now(UTC)
                )
