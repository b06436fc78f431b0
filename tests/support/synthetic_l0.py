"""Test-only: an ``ObjectStore`` whose L0 area is generated, not stored.

Millions of L0 keys are listed page by page from a formula (nothing is kept
per key), deletions are counted and dropped, and everything outside
``{root}/l0/`` (the controller log, node reports, control document, run
summaries) goes to the real store it wraps. Lets a test measure what a
collection round itself holds in memory at a scale the embedded S3 cannot
seed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from epochgc.storage.keys import l0_prefix
from epochgc.storage.object_store import DeleteOutcome, ObjectInfo
from tests.support.wrapping import StoreWrapper


class SyntheticL0Store(StoreWrapper):
    """``shards`` shards of ``per_shard`` keys each; key ``i`` of a shard has
    epoch ``1 + i * epochs // per_shard`` (so epochs ``1..epochs``), size
    ``size`` and ``last_modified``."""

    def __init__(
        self,
        store: Any,
        root: str,
        *,
        shards: int,
        per_shard: int,
        epochs: int,
        size: int,
        last_modified: datetime,
    ) -> None:
        super().__init__(store)
        self._prefix = l0_prefix(root)
        self._shards = shards
        self._per_shard = per_shard
        self._epochs = epochs
        self._size = size
        self._last_modified = last_modified
        self._lock = threading.Lock()
        self.deleted = 0
        self.delete_requests = 0

    def epoch_of(self, index: int) -> int:
        return 1 + index * self._epochs // self._per_shard

    def list_prefixes(self, prefix: str) -> list[str]:
        if prefix != self._prefix:
            return list(self._store.list_prefixes(prefix))
        return [f"{self._prefix}{shard:03d}/" for shard in range(self._shards)]

    def list_pages(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[list[ObjectInfo]]:
        if not prefix.startswith(self._prefix):
            yield from self._store.list_pages(prefix, start_after=start_after, page_size=page_size)
            return
        rest = prefix[len(self._prefix) :]
        if len(rest) != 4 or not rest[:3].isdigit() or int(rest[:3]) >= self._shards:
            raise AssertionError(f"the synthetic store lists whole shards only, not {prefix!r}")
        assert start_after is None
        size, last_modified = self._size, self._last_modified
        for start in range(0, self._per_shard, page_size):
            # Keys of a page share their epoch but a few times: format the
            # shard/epoch part once per epoch, not once per key.
            heads: dict[int, str] = {}
            page = []
            for i in range(start, min(start + page_size, self._per_shard)):
                epoch = self.epoch_of(i)
                head = heads.get(epoch)
                if head is None:
                    head = heads[epoch] = f"{prefix}{epoch:018d}/00000000-0000-4000-8000-"
                page.append(ObjectInfo(f"{head}{i:012x}", size, "", last_modified))
            yield page

    def list_objects(
        self, prefix: str, *, start_after: str | None = None, page_size: int = 1000
    ) -> Iterator[ObjectInfo]:
        for page in self.list_pages(prefix, start_after=start_after, page_size=page_size):
            yield from page

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        if any(k.startswith(self._prefix) for k in keys):
            with self._lock:
                self.deleted += len(keys)
                self.delete_requests += 1
            return DeleteOutcome(tuple(keys), {}, 1)
        return self._store.delete_batch(keys)  # type: ignore[no-any-return]

    def delete_many(self, keys: Iterable[str]) -> DeleteOutcome:
        raise AssertionError("the collector deletes L0 objects in batches")
