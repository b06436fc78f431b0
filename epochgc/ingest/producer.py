"""The reference producer: batch records of many partitions into shared L0
objects, then register each partition's chunk with its leader.

``produce(topic, partition, records)`` returns the records' offsets once
their placeholder is durably applied in the partition log; nothing is
acknowledged earlier.

Batching: records wait up to ``linger_seconds`` or until ``max_batch_bytes``
are pending; a flush uploads one L0 object stamped with the cached cluster
epoch (at least the revision of every topic in it), then hands each
partition's chunk to that partition's sender.

Ordering: each partition has one sender that submits chunks in produce
order, keeps up to ``depth`` of them in flight at the leader, and
acknowledges them head first. A chunk rejected at the fence (stale epoch)
is re-uploaded with a fresh epoch before anything behind it is submitted;
its first upload is an orphan for GC. When a leader fails, every
unacknowledged chunk fails with it; the sender waits for the next leader
and replays them in order. A chunk whose append outcome was unknown (the
store failed after the write landed) may then appear twice: delivery is
at-least-once in that case.

Incarnations: leaders are found by topic name, but a chunk is bound to the
incarnation ``revision_of(topic)`` named at its first upload. A chunk whose
incarnation was deleted while it waited (a replay after the old leader
stepped down) fails with ``TopicNotFoundError`` instead of being appended
to the next topic of the same name: records produced to one incarnation
never show up in another (docs/contract.md, "Bucket layout (layout 2)"), and an acknowledged offset
always belongs to the incarnation the caller produced to.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from epochgc.errors import EpochGCError, NotLeaderError, StaleEpochError, TopicNotFoundError
from epochgc.events import Event, EventChannel
from epochgc.ingest.upload import upload_l0
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.epoch import EpochCache
from epochgc.watermarks.partition.commands import PlaceholderBatch
from epochgc.watermarks.partition.directory import LeaderDirectory

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass
class _Chunk:
    """One partition's records in one L0 object, and who waits for them."""

    topic: str
    partition: int
    records: list[bytes]
    waiters: list[tuple[int, asyncio.Future[list[int]]]]
    epoch: int = -1
    batch: PlaceholderBatch | None = None
    revision: int = -1
    """The topic incarnation this chunk is for: ``revision_of(topic)`` at its
    first upload; only a leader of that incarnation may append it."""


@dataclass
class _Pending:
    records: dict[TopicPartition, list[bytes]] = field(default_factory=dict)
    waiters: dict[TopicPartition, list[tuple[int, asyncio.Future[list[int]]]]] = field(
        default_factory=dict
    )
    size: int = 0


@dataclass(frozen=True)
class Acknowledged(Event):
    """One ``produce`` call's records are durable, ``latency_seconds``
    after it was made."""

    latency_seconds: float


@dataclass
class ProducerStats:
    """Counters for metrics."""

    l0_objects: int = 0
    l0_bytes: int = 0
    records_acked: int = 0
    stale_epoch_retries: int = 0
    orphaned_uploads: int = 0
    replays: int = 0


class Producer:
    """Writes records through shared L0 objects.

    Example::

        producer = Producer(store, "epochgc", directory, epochs, revision_of, shards=16)
        offsets = await producer.produce("orders", 0, [b"a", b"b"])
        await producer.close()

    Args:
        directory: where partition leaders are.
        epochs: the cluster-epoch cache.
        revision_of: a topic's revision (an L0 object's epoch must be at
            least the revision of every topic in it).
        shards: L0 shards to spread objects over.
        linger_seconds / max_batch_bytes: batching thresholds.
        depth: chunks in flight per partition.
        events: where each ``produce`` call's latency is published once
            its records are durable (``Acknowledged``; metrics).
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        directory: LeaderDirectory,
        epochs: EpochCache,
        revision_of: Callable[[str], int],
        *,
        shards: int,
        linger_seconds: float = 0.25,
        max_batch_bytes: int = 4 * 1024 * 1024,
        depth: int = 8,
        choose_shard: Callable[[int], int] = random.randrange,
        events: EventChannel | None = None,
    ) -> None:
        self._store = store
        self._root = root
        self._directory = directory
        self._epochs = epochs
        self._revision_of = revision_of
        self._shards = shards
        self._linger = linger_seconds
        self._max_bytes = max_batch_bytes
        self._depth = depth
        self._choose_shard = choose_shard
        self._events = events if events is not None else EventChannel()
        self._pending = _Pending()
        self._linger_task: asyncio.Task[None] | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self._senders: dict[TopicPartition, _Sender] = {}
        self.stats = ProducerStats()

    async def produce(self, topic: str, partition: int, records: Sequence[bytes]) -> list[int]:
        """Write ``records`` to a partition; return their offsets once durable.

        Raises:
            NotLeaderError: no leader for the partition within the timeout.
            TopicNotFoundError: the topic incarnation the records were bound
                to was deleted before they were appended (nothing written).
        """
        if not records:
            return []
        future: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        key = (topic, partition)
        pending = self._pending
        chunk = pending.records.setdefault(key, [])
        pending.waiters.setdefault(key, []).append((len(records), future))
        chunk.extend(records)
        pending.size += sum(len(r) for r in records)
        if pending.size >= self._max_bytes:
            self._start_flush()
        elif self._linger_task is None:
            self._linger_task = asyncio.get_running_loop().create_task(self._linger_then_flush())
        started = time.monotonic()
        offsets = await future
        self._events.publish(Acknowledged(time.monotonic() - started))
        return offsets

    async def flush(self) -> None:
        """Flush what is pending now and wait for every flush in progress."""
        self._start_flush()
        while self._flushes:
            await asyncio.gather(*list(self._flushes), return_exceptions=True)

    async def close(self) -> None:
        """Flush, then stop the partition senders once they are idle."""
        await self.flush()
        for sender in self._senders.values():
            await sender.close()

    async def _linger_then_flush(self) -> None:
        await asyncio.sleep(self._linger)
        self._linger_task = None
        self._start_flush()

    def _start_flush(self) -> None:
        if self._linger_task is not None:
            self._linger_task.cancel()
            self._linger_task = None
        pending, self._pending = self._pending, _Pending()
        if not pending.records:
            return
        chunks = [
            _Chunk(topic, partition, records, pending.waiters[(topic, partition)])
            for (topic, partition), records in pending.records.items()
        ]
        # Queue every chunk with its sender now, in flush order, so a later
        # flush can never overtake this one on any partition.
        ready = asyncio.get_running_loop().create_future()
        for chunk in chunks:
            self._sender(chunk.topic, chunk.partition).enqueue(chunk, ready)
        task = asyncio.get_running_loop().create_task(self._upload(chunks, ready))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _upload(self, chunks: list[_Chunk], ready: asyncio.Future[None]) -> None:
        try:
            await self.upload_chunks(chunks)
            ready.set_result(None)
        except Exception as err:
            # Delivered to every chunk's sender through ``ready``, which fails
            # the chunks' produce calls; nothing else waits on this task.
            ready.set_exception(err)
            log.debug("L0 upload failed: %s", err)

    async def upload_chunks(self, chunks: list[_Chunk]) -> None:
        """Upload ``chunks`` as one L0 object at a fresh-enough epoch."""
        # Both may read S3 (an epoch refresh, a controller catch-up): keep
        # them off the event loop. A re-upload keeps the chunk's incarnation.
        revisions, epoch = await asyncio.to_thread(self._bind, chunks)
        for chunk, revision in zip(chunks, revisions, strict=True):
            chunk.revision = revision
        uploaded = await asyncio.to_thread(
            upload_l0,
            self._store,
            self._root,
            epoch,
            [(c.topic, c.partition, c.records) for c in chunks],
            shards=self._shards,
            choose_shard=self._choose_shard,
        )
        self.stats.l0_objects += 1
        self.stats.l0_bytes += uploaded.size
        for chunk in chunks:
            chunk.epoch = epoch
            chunk.batch = uploaded.batch_for(chunk.topic, chunk.partition)

    def _bind(self, chunks: list[_Chunk]) -> tuple[list[int], int]:
        """Each chunk's incarnation (kept from a first upload) and an epoch
        at least the revision of every one of them."""
        revisions = [c.revision if c.revision >= 0 else self._revision_of(c.topic) for c in chunks]
        return revisions, self._epoch_for(max(revisions))

    def _epoch_for(self, floor: int) -> int:
        epoch = self._epochs.get()
        if epoch < floor:
            self._epochs.invalidate(below=floor)
            epoch = self._epochs.get()
        if epoch < floor:
            raise EpochGCError(f"cluster epoch {epoch} is below topic revision {floor}")
        return epoch

    def _sender(self, topic: str, partition: int) -> _Sender:
        key = (topic, partition)
        if key not in self._senders:
            self._senders[key] = _Sender(self, topic, partition)
        return self._senders[key]

    def _acknowledge(self, chunk: _Chunk, first_offset: int) -> None:
        offset = first_offset
        for count, future in chunk.waiters:
            if not future.done():
                future.set_result(list(range(offset, offset + count)))
            offset += count
        self.stats.records_acked += len(chunk.records)

    def _fail(self, chunk: _Chunk, error: BaseException) -> None:
        for _count, future in chunk.waiters:
            if not future.done():
                future.set_exception(error)


class LeaderFit(Enum):
    """What a chunk bound to one incarnation may do with the leader the
    directory gives for its topic name (``leader_fit``)."""

    SUBMIT = "submit"
    """The leader serves the chunk's incarnation."""
    REFUSE = "refuse"
    """The leader serves a newer incarnation: the chunk's was deleted."""
    WAIT = "wait"
    """The leader serves an older incarnation: its node has not seen the
    new one yet and will step down."""


def leader_fit(serving: int, bound: int) -> LeaderFit:
    """The producer's incarnation guard. Pure. A chunk bound to revision
    ``bound`` is appended only by a leader of that revision (``serving``):
    appending it to a newer incarnation would move its records into a topic
    they were never produced to, and an older one's leader is about to go."""
    if serving > bound:
        return LeaderFit.REFUSE
    if serving < bound:
        return LeaderFit.WAIT
    return LeaderFit.SUBMIT


OLDER_LEADER_WAIT_SECONDS = 60.0
"""How long a chunk waits for a leader of its incarnation while the leader
of an older one is still registered (as ``wait_for_leader`` waits)."""

_LATER = object()
"""``_Sender._submit``: not now; settle the chunks in flight first."""


class _Sender:
    """Submits one partition's chunks in order, ``depth`` in flight."""

    def __init__(self, producer: Producer, topic: str, partition: int) -> None:
        self._producer = producer
        self._topic = topic
        self._partition = partition
        self._queue: collections.deque[tuple[_Chunk, asyncio.Future[None]]] = collections.deque()
        self._wakeup = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._closing = False

    def enqueue(self, chunk: _Chunk, uploaded: asyncio.Future[None]) -> None:
        self._queue.append((chunk, uploaded))
        self._wakeup.set()

    async def close(self) -> None:
        self._closing = True
        self._wakeup.set()
        await self._task

    async def _run(self) -> None:
        inflight: collections.deque[tuple[_Chunk, asyncio.Future[int]]] = collections.deque()
        inflight_term = -1
        while True:
            if not self._queue and not inflight:
                if self._closing:
                    return
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            while self._queue and len(inflight) < self._producer._depth:
                chunk, uploaded = self._queue[0]
                try:
                    await uploaded
                except Exception as err:
                    self._queue.popleft()
                    self._producer._fail(chunk, err)
                    continue
                submitted = await self._submit(chunk, inflight_term if inflight else None)
                if submitted is _LATER:
                    break  # the leader changed: settle what is in flight first
                if submitted is None:
                    self._queue.popleft()
                    continue
                assert isinstance(submitted, tuple)
                future, term = submitted
                self._queue.popleft()
                inflight.append((chunk, future))
                inflight_term = term
            if inflight:
                await self._settle_head(inflight)

    async def _submit(
        self, chunk: _Chunk, only_term: int | None
    ) -> tuple[asyncio.Future[int], int] | object | None:
        """Submit at the fence, re-uploading after stale-epoch rejections and
        waiting out failovers; return the future and the leader term it was
        pinned to, None if the chunk was failed for good, or ``_LATER`` when
        ``only_term`` is given and that leader is gone (chunks of that term
        are still in flight and must settle before anything newer goes)."""
        producer = self._producer
        older_since: float | None = None
        while True:
            if only_term is not None:
                service = producer._directory.current(self._topic, self._partition)
                if service is None or service.term != only_term:
                    return _LATER
            else:
                try:
                    service = await producer._directory.wait_for_leader(
                        self._topic, self._partition
                    )
                except NotLeaderError as err:
                    producer._fail(chunk, err)
                    return None
            assert chunk.batch is not None
            serving = service.leader.replica.pid.revision
            fit = leader_fit(serving, chunk.revision)
            if fit is LeaderFit.REFUSE:
                # The chunk's incarnation was deleted and the name created
                # again: appending here would move its records into a topic
                # they were never produced to.
                producer._fail(
                    chunk,
                    TopicNotFoundError(
                        f"{self._topic}/{self._partition}@{chunk.revision} was deleted "
                        f"(the topic is now revision {serving}); records not written"
                    ),
                )
                return None
            if fit is LeaderFit.WAIT:
                # The leader of an older incarnation is still registered: its
                # node has not seen the new one yet and will step down.
                if only_term is not None:
                    return _LATER
                older_since = time.monotonic() if older_since is None else older_since
                if time.monotonic() - older_since > OLDER_LEADER_WAIT_SECONDS:
                    producer._fail(
                        chunk,
                        NotLeaderError(
                            f"{self._topic}/{self._partition}: no leader of revision "
                            f"{chunk.revision} within {OLDER_LEADER_WAIT_SECONDS:.0f}s "
                            f"(revision {serving} still leads)"
                        ),
                    )
                    return None
                await asyncio.sleep(0.05)
                continue
            try:
                return await service.submit(service.term, chunk.epoch, chunk.batch), service.term
            except StaleEpochError as err:
                producer.stats.stale_epoch_retries += 1
                producer.stats.orphaned_uploads += 1
                producer._epochs.invalidate(below=err.window_previous)
                log.info(
                    "%s/%d: epoch %d below window [%d, %d]; re-uploading",
                    self._topic,
                    self._partition,
                    chunk.epoch,
                    err.window_previous,
                    err.window_max,
                )
                await producer.upload_chunks([chunk])
            except NotLeaderError:
                if only_term is not None:
                    return _LATER
                await asyncio.sleep(0.05)

    async def _settle_head(
        self, inflight: collections.deque[tuple[_Chunk, asyncio.Future[int]]]
    ) -> None:
        chunk, future = inflight[0]
        try:
            first = await future
        except (NotLeaderError, StaleEpochError) as err:
            # The leader failed (or rejected at apply time): everything in
            # flight behind this chunk failed with it. Replay them all, in
            # order, ahead of anything not yet submitted.
            await asyncio.gather(*(f for _c, f in inflight), return_exceptions=True)
            failed = [c for c, f in inflight if f.exception() is not None]
            acked = [(c, f) for c, f in inflight if f.exception() is None]
            for good, good_future in acked:
                self._producer._acknowledge(good, good_future.result())
            inflight.clear()
            self._producer.stats.replays += len(failed)
            log.info(
                "%s/%d: replaying %d chunks after %s",
                self._topic,
                self._partition,
                len(failed),
                err,
            )
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            for replay in reversed(failed):
                self._queue.appendleft((replay, done))
            return
        inflight.popleft()
        self._producer._acknowledge(chunk, first)


def acknowledged_into(observe: Callable[[float], None]) -> EventChannel:
    """A new channel whose ``Acknowledged`` events go to ``observe`` (a
    latency histogram's)."""
    events = EventChannel()
    events.subscribe(Acknowledged, lambda event: observe(event.latency_seconds))
    return events
