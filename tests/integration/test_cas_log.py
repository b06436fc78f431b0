"""The conditional-append log on the embedded S3."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from epochgc.errors import (
    InvariantViolation,
    PreconditionFailedError,
)
from epochgc.runtime import Runtime
from epochgc.storage.cas_log import ConditionalAppendLog
from epochgc.storage.s3 import S3ObjectStore

PREFIX = "epochgc/meta/partitions/orders/0/log/"
SNAPSHOT = "epochgc/meta/partitions/orders/0/snapshot"


def make_log(store: object, **kwargs: object) -> ConditionalAppendLog:
    return ConditionalAppendLog(
        store,  # type: ignore[arg-type]
        PREFIX,
        snapshot_key=SNAPSHOT,
        runtime=Runtime(sleep=lambda _s: None),
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
