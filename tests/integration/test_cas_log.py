"""The conditional-append log and pipelined appends on the embedded S3."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter

import pytest

from epochgc.errors import (
    FencedError,
    InvariantViolation,
    PreconditionFailedError,
    RetriesExhaustedError,
    TransientStorageError,
)
from epochgc.storage.cas_log import ConditionalAppendLog
from epochgc.storage.pipeline import Divergence, PipelinedAppender, replay_all
from epochgc.storage.s3 import S3ObjectStore
from tests.support.faults import HookedStore

PREFIX = "epochgc/meta/partitions/orders/0/log/"
SNAPSHOT = "epochgc/meta/partitions/orders/0/snapshot"


def make_log(store: object, **kwargs: object) -> ConditionalAppendLog:
    return ConditionalAppendLog(
        store,  # type: ignore[arg-type]
        PREFIX,
        snapshot_key=SNAPSHOT,
        sleep=lambda _s: None,
        **kwargs,  # type: ignore[arg-type]
    )


def offsets_in_store(store: S3ObjectStore) -> list[int]:
    return [int(o.key.rsplit("/", 1)[1]) for o in store.list_objects(PREFIX)]


def test_appends_read_back_in_order(store: S3ObjectStore) -> None:
    log = make_log(store)
    assert log.tail() == -1
    assert [log.append(f"e{i}".encode()) for i in range(5)] == [0, 1, 2, 3, 4]
    read = log.read(0)
    assert [e.payload for e in read.entries] == [b"e0", b"e1", b"e2", b"e3", b"e4"]
    assert read.hole is None and read.next_offset == 5
    assert [e.offset for e in log.read(3).entries] == [3, 4]
    assert [e.offset for e in log.read(1, limit=2).entries] == [1, 2]
    assert make_log(store).tail() == 4, "a fresh reader finds the tail by listing"


def test_controller_style_log_starts_at_one(store: S3ObjectStore) -> None:
    log = ConditionalAppendLog(store, "epochgc/meta/controller/", first_offset=1)
    assert log.tail() == 0
    assert log.append(b"tick") == 1
    assert store.get("epochgc/meta/controller/00000000000000000001").body == b"tick"


def test_eight_threads_racing_for_one_slot_exactly_one_wins(store: S3ObjectStore) -> None:
    log = make_log(store)
    barrier = threading.Barrier(8)
    results: dict[int, bool] = {}

    def contend(i: int) -> None:
        barrier.wait()
        results[i] = make_log(store).append_at(0, f"writer-{i}".encode())

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1
    assert log.read(0).entries[0].payload == f"writer-{winners[0]}".encode()


def test_eight_concurrent_appenders_leave_no_gaps_or_duplicates(store: S3ObjectStore) -> None:
    per_writer = 6
    barrier = threading.Barrier(8)
    written: dict[int, list[int]] = {}

    def writer(i: int) -> None:
        log = make_log(store)
        barrier.wait()
        written[i] = [log.append(f"w{i}-{n}".encode()) for n in range(per_writer)]

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = make_log(store).read(0).entries
    assert [e.offset for e in entries] == list(range(8 * per_writer))
    payloads = Counter(e.payload for e in entries)
    assert all(count == 1 for count in payloads.values())
    assert len(payloads) == 8 * per_writer
    for i, offsets in written.items():
        assert offsets == sorted(offsets), "one writer's appends keep their order"
        assert [entries[o].payload for o in offsets] == [
            f"w{i}-{n}".encode() for n in range(per_writer)
        ]


def test_identical_bytes_in_the_slot_count_as_our_own_write(store: S3ObjectStore) -> None:
    log = make_log(store)
    assert log.append_at(0, b"same") is True
    assert log.append_at(0, b"same") is True, "a retry after an unknown outcome"
    assert log.append_at(0, b"other") is False


def test_read_stops_at_a_hole(store: S3ObjectStore) -> None:
    log = make_log(store)
    for offset in (0, 1, 3, 4):
        assert log.append_at(offset, f"e{offset}".encode())
    read = log.read(0)
    assert [e.offset for e in read.entries] == [0, 1]
    assert read.hole == 2
    assert log.tail() == 4
    assert log.read(2).entries == () and log.read(2).hole == 2


def test_snapshot_cas_and_truncation_keep_the_tail(store: S3ObjectStore) -> None:
    log = make_log(store)
    for i in range(10):
        log.append(f"e{i}".encode())
    assert log.read_snapshot() is None
    assert log.truncate(5) == 0, "nothing is truncated without a snapshot"
    first = log.write_snapshot(b"state@4", 4, None)
    with pytest.raises(PreconditionFailedError):
        log.write_snapshot(b"other", 4, None)
    assert log.truncate(100) == 5, "only what the snapshot covers"
    assert offsets_in_store(store) == [5, 6, 7, 8, 9]
    second = log.write_snapshot(b"state@9", 9, first)
    with pytest.raises(PreconditionFailedError):
        log.write_snapshot(b"stale", 9, first)
    with pytest.raises(InvariantViolation, match="backwards"):
        log.write_snapshot(b"older", 3, second)
    assert log.truncate(100) == 4
    assert offsets_in_store(store) == [9], "the newest entry always stays"
    fresh = make_log(store)
    snap = fresh.read_snapshot()
    assert snap is not None and (snap.payload, snap.covered_offset) == (b"state@9", 9)
    assert fresh.append(b"e10") == 10, "appends continue after truncation"


def test_snapshot_without_covered_offset_is_refused(store: S3ObjectStore) -> None:
    store.put(SNAPSHOT, b"{}")
    with pytest.raises(InvariantViolation, match="covered-offset"):
        make_log(store).read_snapshot()


def test_pipelined_appends_land_in_order(store: S3ObjectStore) -> None:
    log = make_log(store)
    log.append(b"before")
    written = PipelinedAppender(log, depth=8).append_all([f"p{i}".encode() for i in range(20)])
    assert [e.offset for e in written] == list(range(1, 21))
    assert [e.payload for e in log.read(1).entries] == [f"p{i}".encode() for i in range(20)]


def test_pipelined_head_failure_is_rewritten_in_place(store: S3ObjectStore) -> None:
    """The head's request fails unsent while later slots land; the head is
    re-read, found empty, written again at its slot: order holds, no gap."""
    failed_once: set[str] = set()
    head_key = f"{PREFIX}{0:020d}"

    def fail_head_once(key: str, _body: bytes) -> None:
        if key == head_key and key not in failed_once:
            failed_once.add(key)
            raise TransientStorageError("injected: connection reset")

    log = make_log(HookedStore(store, before_create=fail_head_once))
    payloads = [f"p{i}".encode() for i in range(8)]
    written = PipelinedAppender(log, depth=8).append_all(payloads)
    assert failed_once == {head_key}
    assert [e.offset for e in written] == list(range(8))
    assert [e.payload for e in log.read(0).entries] == payloads


def test_pipelined_unknown_outcome_is_resolved_by_reading_the_slot(store: S3ObjectStore) -> None:
    """The head's write was applied but its answer was lost: the re-read
    finds our own bytes and acknowledges without writing twice."""
    lost: list[str] = []

    def lose_first_answer(key: str, _body: bytes) -> None:
        if not lost:
            lost.append(key)
            raise TransientStorageError("injected: read timeout after apply")

    log = make_log(HookedStore(store, after_create=lose_first_answer))
    payloads = [f"p{i}".encode() for i in range(4)]
    written = PipelinedAppender(log, depth=1).append_all(payloads)
    assert [e.payload for e in written] == payloads
    assert [e.payload for e in log.read(0).entries] == payloads
    assert log.read(0).next_offset == 4


def test_pipelined_divergence_rereads_and_replays_in_order(store: S3ObjectStore) -> None:
    """Another writer wins the head's slot while ours are in flight: the
    resolver sees what is in the log and our payloads from the lost slot on;
    its answer is replayed in order after the foreign entry."""
    stolen: list[str] = []
    head_key = f"{PREFIX}{0:020d}"

    def steal_head(key: str, _body: bytes) -> None:
        if key == head_key and not stolen:
            stolen.append(key)
            store.put_if_absent(key, b"foreign")

    seen: list[Divergence] = []

    def resolve(divergence: Divergence) -> list[bytes]:
        seen.append(divergence)
        return list(replay_all(divergence))

    log = make_log(HookedStore(store, before_create=steal_head))
    payloads = [f"p{i}".encode() for i in range(3)]
    written = PipelinedAppender(log, depth=1, resolve=resolve).append_all(payloads)
    assert len(seen) == 1
    assert seen[0].offset == 0
    assert seen[0].unacknowledged == tuple(payloads)
    assert seen[0].observed[0].payload == b"foreign"
    entries = log.read(0).entries
    assert entries[0].payload == b"foreign"
    # Our acknowledged entries are the replayed ones, in order, after everything observed.
    assert [e.payload for e in written] == payloads
    assert [e.offset for e in written] == sorted(e.offset for e in written)
    assert written[0].offset > seen[0].observed[-1].offset
    assert [entries[e.offset].payload for e in written] == payloads


def test_pipelined_divergence_can_fence_the_writer(store: S3ObjectStore) -> None:
    """A resolver that sees a newer writer in the log stops the pipeline."""

    def fence(divergence: Divergence) -> list[bytes]:
        raise FencedError(f"slot {divergence.offset} taken by a newer writer")

    steal = HookedStore(store, before_create=lambda key, _b: _put_foreign(store, key))
    with pytest.raises(FencedError, match="slot 0"):
        PipelinedAppender(make_log(steal), depth=4, resolve=fence).append_all([b"a", b"b"])
    assert make_log(store).read(0).entries[0].payload == b"foreign"


def _put_foreign(store: S3ObjectStore, key: str) -> None:
    with contextlib.suppress(PreconditionFailedError):
        store.put_if_absent(key, b"foreign")


def test_pipelined_head_that_keeps_failing_raises(store: S3ObjectStore) -> None:
    def always_fail(_key: str, _body: bytes) -> None:
        raise TransientStorageError("injected: store down")

    log = make_log(HookedStore(store, before_create=always_fail))
    with pytest.raises(RetriesExhaustedError, match="head slot 0"):
        PipelinedAppender(log, depth=4, max_head_retries=2).append_all([b"a", b"b"])
    assert offsets_in_store(store) == []
