"""Uploading one L0 object and registering its chunks with the partition
leaders: the synchronous core of the write path.

The order is the safety argument's: the object is uploaded first (an object
nobody references is an orphan that GC removes once ``M`` passes its epoch),
then each partition's placeholder is appended under the epoch the object
carries, and only an applied placeholder acknowledges its records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from epochgc.runtime import SYSTEM, Runtime
from epochgc.storage.keys import encode_l0_key, uuid_text
from epochgc.storage.l0_format import ChunkRef, build_l0_object
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.partition.commands import PlaceholderBatch


@dataclass(frozen=True)
class UploadedL0:
    """An uploaded L0 object and where each partition's chunk is."""

    key: str
    epoch: int
    size: int
    chunks: Mapping[tuple[str, int], ChunkRef]

    def batch_for(self, topic: str, partition: int) -> PlaceholderBatch:
        """The placeholder batch pointing at this object's chunk of a partition."""
        ref = self.chunks[(topic, partition)]
        return PlaceholderBatch(self.key, ref.byte_offset, ref.byte_length, ref.records)


def upload_l0(
    store: ObjectStore,
    root: str,
    epoch: int,
    chunks: Sequence[tuple[str, int, Sequence[bytes]]],
    *,
    shards: int,
    choose_shard: Callable[[int], int] | None = None,
    runtime: Runtime = SYSTEM,
) -> UploadedL0:
    """Lay out and upload one L0 object at ``epoch`` into a random shard
    (``choose_shard``, or drawn from ``runtime``).

    The key is unique (a fresh random id), so a plain PUT cannot overwrite
    anything; a retried PUT after a lost answer rewrites the same bytes.
    """
    body, index = build_l0_object(chunks)
    shard = (
        choose_shard(shards)
        if choose_shard is not None
        else min(int(runtime.unit_random() * shards), shards - 1)
    )
    key = encode_l0_key(root, shard, epoch, uuid_text(runtime.new_id()))
    store.put(key, body)
    return UploadedL0(key, epoch, len(body), {(c.topic, c.partition): c for c in index})
