"""Test-only: an ``ObjectStore`` wrapper that records every deleting call
(``delete``, ``delete_batch``, ``delete_many``) before passing it on, so a
test can say "nothing was deleted" about every path at once, including a
deleting job it does not know about."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from epochgc.storage.object_store import DeleteOutcome
from tests.support.wrapping import StoreWrapper


class DeleteRecorder(StoreWrapper):
    """Wraps an ``ObjectStore``; ``deleted`` lists the keys of every
    deleting call sent through it (in order). Everything else goes straight
    through."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self._lock = threading.Lock()
        self.deleted: list[str] = []

    def _record(self, keys: Iterable[str]) -> None:
        with self._lock:
            self.deleted.extend(keys)

    def delete(self, key: str) -> None:
        self._record([key])
        self._store.delete(key)

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        self._record(keys)
        return self._store.delete_batch(keys)  # type: ignore[no-any-return]

    def delete_many(self, keys: Iterable[str]) -> DeleteOutcome:
        keys = list(keys)
        self._record(keys)
        return self._store.delete_many(keys)  # type: ignore[no-any-return]
