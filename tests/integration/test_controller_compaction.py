"""Controller-log compaction on the embedded S3: opening after compaction
costs a constant number of requests plus the tail, readers racing a
truncation re-read the snapshot and end with the right view, the newest
entry (the cluster epoch) survives, epoch start times survive for recent
epochs, concurrent compactors agree, and ``epochgc controller compact``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.storage.cas_log import COVERED_OFFSET_METADATA
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import (
    controller_log_prefix,
    controller_snapshot_key,
    encode_log_entry_key,
    parse_log_entry_key,
)
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller, ControllerView
from epochgc.watermarks.controller_codec import DeletedTopic, EpochTick, encode_controller_entry
from tests.support.cli import run_cli
from tests.support.config_files import write_server_config
from tests.support.moto_seed import seed_objects
from tests.support.wrapping import StoreWrapper

ROOT = "epochgc"
T0 = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
PREFIX = controller_log_prefix(ROOT)


def tick_time(offset: int) -> datetime:
    return T0 + timedelta(minutes=offset)


def seed_ticks(bucket: str, first: int, last: int) -> None:
    """Epoch ticks ``first..last`` written straight into the server (one
    minute apart): long histories without thousands of PUTs over HTTP."""
    for offset in range(first, last + 1):
        body = encode_controller_entry(EpochTick(tick_time(offset)))
        seed_objects(bucket, [encode_log_entry_key(PREFIX, offset)], body)


def entry_offsets(store: S3ObjectStore) -> list[int]:
    return [
        offset
        for info in store.list_objects(PREFIX)
        if (offset := parse_log_entry_key(info.key, PREFIX)) is not None
    ]


def counting(store: S3ObjectStore) -> RequestStats:
    stats = RequestStats()
    stats.attach(store.client)
    return stats


def replayed(store: S3ObjectStore) -> ControllerView:
    """The view of a reader that replays the log from offset 1 (the
    reference a compacted log must agree with)."""
    return Controller(store, ROOT).snapshot()


def build_history(store: S3ObjectStore, bucket: str, ticks: int) -> int:
    """Topics created and deleted among ``ticks`` epoch ticks; return the tail."""
    writer = Controller(store, ROOT)
    writer.create_topic("orders", 2)  # revision 1
    seed_ticks(bucket, 2, ticks + 1)
    writer.delete_topic("orders")
    writer.create_topic("orders", 3)
    writer.create_topic("audit", 1)
    return writer.current_epoch()


@pytest.mark.parametrize("history", [100, 1000])
def test_opening_after_compaction_costs_the_snapshot_plus_the_tail(
    store: S3ObjectStore, bucket: str, history: int
) -> None:
    tail = build_history(store, bucket, history)
    compactor = Controller(store, ROOT)
    reference = compactor.snapshot()  # replayed from offset 1
    result = compactor.compact()
    assert result.snapshot_written and result.snapshot_offset == tail
    assert result.entries_deleted == tail - 1, "everything but the newest entry"
    seed_ticks(bucket, tail + 1, tail + 5)

    stats = counting(store)
    view = Controller(store, ROOT).snapshot()
    assert stats.by_operation() == {"GetObject": 1 + 5, "ListObjectsV2": 1, "HeadObject": 1}, (
        "one GET of the snapshot, one LIST of the tail, one GET per tail entry, one HEAD "
        "of the snapshot (unchanged: the entries are the log's own): the same whatever "
        "the history"
    )
    assert view.offset == tail + 5
    assert view.topics == reference.topics
    assert view.deleted == reference.deleted == {("orders", 1): DeletedTopic("orders", 1, tail - 2)}


def test_the_newest_entry_is_kept_and_the_epoch_never_goes_back(
    store: S3ObjectStore, bucket: str
) -> None:
    seed_ticks(bucket, 1, 300)
    reader = Controller(store, ROOT)
    assert reader.current_epoch() == 300
    Controller(store, ROOT).compact()
    assert entry_offsets(store) == [300]
    assert reader.current_epoch() == 300
    fresh = Controller(store, ROOT)
    stats = counting(store)
    assert fresh.current_epoch() == 300
    assert stats.by_operation() == {"ListObjectsV2": 1}, "the tail is one small LIST"
    assert fresh.tick() == 301, "a new append never reuses an offset"
    Controller(store, ROOT).compact()
    assert entry_offsets(store) == [301]
    assert Controller(store, ROOT).current_epoch() == 301


def test_a_reader_finding_its_next_entries_truncated_rereads_the_snapshot(
    store: S3ObjectStore, bucket: str
) -> None:
    seed_ticks(bucket, 1, 40)
    Controller(store, ROOT).compact()  # snapshot at 40
    reader = Controller(store, ROOT)
    assert reader.snapshot().offset == 40  # read the snapshot at 40
    writer = Controller(store, ROOT)
    writer.create_topic("orders", 1)  # 41
    seed_ticks(bucket, 42, 150)
    writer.compact()  # snapshot at 150; 41..149 deleted under the reader
    assert entry_offsets(store) == [150]

    stats = counting(store)
    view = reader.snapshot()
    assert view.offset == 150 and view.topics["orders"].revision == 41
    ops = stats.by_operation()
    assert ops["GetObject"] == 1, "the snapshot read again, no entry"
    assert reader.epoch_started_at(150) == tick_time(150)


class _TruncateBetweenListAndGet(StoreWrapper):
    """The store, where a compaction by another process runs after the
    reader's LIST and before its first GET of an entry."""

    def __init__(self, store: S3ObjectStore, compact: Any) -> None:
        super().__init__(store)
        self._compact = compact
        self.fired = False

    def get(self, key: str, **kwargs: Any) -> object:
        if not self.fired and parse_log_entry_key(key, PREFIX) is not None:
            self.fired = True
            self._compact()
        return self._store.get(key, **kwargs)


def test_a_reader_whose_listed_entries_vanish_rereads_the_snapshot(
    store: S3ObjectStore, bucket: str
) -> None:
    seed_ticks(bucket, 1, 30)
    writer = Controller(store, ROOT)
    writer.create_topic("orders", 2)  # 31
    seed_ticks(bucket, 32, 60)
    racing = _TruncateBetweenListAndGet(store, lambda: Controller(store, ROOT).compact())
    reader = Controller(racing, ROOT)  # type: ignore[arg-type]
    view = reader.snapshot()
    assert racing.fired
    assert view == replayed(store)
    assert view.offset == 60 and view.topics["orders"].revision == 31


def test_epoch_start_times_survive_compaction(store: S3ObjectStore, bucket: str) -> None:
    seed_ticks(bucket, 1, 120)
    Controller(store, ROOT, epoch_history=50).compact()
    reader = Controller(store, ROOT)
    reader.snapshot()
    for epoch in (71, 100, 120):
        assert reader.epoch_started_at(epoch) == tick_time(epoch), "recent epochs are exact"
    old = reader.epoch_started_at(10)
    assert old is not None and old >= tick_time(10), "older ones: an upper bound, never earlier"
    assert reader.epoch_started_at(0) is None
    assert reader.epoch_started_at(121) is None, "not written yet: unknown (kept by retention)"


def test_a_concurrent_compactor_winning_the_snapshot_race(
    store: S3ObjectStore, bucket: str
) -> None:
    seed_ticks(bucket, 1, 50)
    other = Controller(store, ROOT)

    class _Racing(_TruncateBetweenListAndGet):
        def put_if_absent(self, key: str, body: bytes, **kwargs: Any) -> str:
            if key == controller_snapshot_key(ROOT) and not self.fired:
                self.fired = True
                other.compact()  # writes the snapshot at 50 first
            return self._store.put_if_absent(key, body, **kwargs)

        def get(self, key: str, **kwargs: Any) -> object:
            return self._store.get(key, **kwargs)

    racing = _Racing(store, None)
    result = Controller(racing, ROOT).compact()  # type: ignore[arg-type]
    assert racing.fired
    assert not result.snapshot_written and result.snapshot_offset == 50
    assert entry_offsets(store) == [50]
    assert Controller(store, ROOT).snapshot().offset == 50


def test_min_entries_skips_a_compaction_with_little_to_gain(
    store: S3ObjectStore, bucket: str
) -> None:
    seed_ticks(bucket, 1, 20)
    controller = Controller(store, ROOT)
    skipped = controller.compact(min_entries=21)
    assert skipped.skipped and skipped.entries_above_snapshot == 20
    assert len(entry_offsets(store)) == 20
    done = controller.compact(min_entries=20)
    assert not done.skipped and done.entries_deleted == 19
    again = controller.compact()
    assert again.skipped and again.entries_above_snapshot == 0, "nothing new above the snapshot"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"v": 2, "offset": 5}', UnsupportedVersionError),
        (b'{"v": 1, "offset": 5, "topics": "nope"}', MalformedRecordError),
    ],
)
def test_an_untrusted_snapshot_stops_the_reader(
    store: S3ObjectStore, bucket: str, body: bytes, error: type[Exception]
) -> None:
    """The collector then goes safety_blocked rather than guess at topics."""
    seed_ticks(bucket, 1, 6)
    store.put(controller_snapshot_key(ROOT), body, metadata={COVERED_OFFSET_METADATA: "5"})
    with pytest.raises(error):
        Controller(store, ROOT).snapshot()


def test_controller_compact_command(tmp_path: Path, s3_server: EmbeddedS3, bucket: str) -> None:
    config = str(write_server_config(tmp_path / "cli.toml", s3_server.endpoint_url, bucket))
    seed_ticks(bucket, 1, 30)
    done = run_cli("controller", "compact", "--config", config)
    assert done.returncode == 0, done.stderr
    assert "snapshot at offset 30 (written); 29 log entries deleted" in done.stdout
    again = run_cli("controller", "compact", "--config", config, "--json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["skipped"] is True and doc["snapshot_offset"] == 30 and doc["requests"] > 0
    listed = json.loads(run_cli("epoch", "show", "--config", config, "--json").stdout)
    assert listed == {"cluster_epoch": 30}
    bad = run_cli("controller", "compact", "--config", str(tmp_path / "missing.toml"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def _truncated_under(store: S3ObjectStore) -> tuple[Controller, Controller]:
    """``orders`` created at 1, a tick at 2; a reader and a second writer
    both last saw the log at 2; then ``orders`` is deleted at 3, a tick
    lands at 4 and a compaction (snapshot at 4) deletes 1..3: slot 3 is
    free again under both of them."""
    writer = Controller(store, ROOT)
    writer.create_topic("orders", 1)  # 1
    writer.tick()  # 2
    reader = Controller(store, ROOT)
    assert reader.snapshot().offset == 2
    stale = Controller(store, ROOT)
    assert stale.current_epoch() == 2
    writer.delete_topic("orders")  # 3
    writer.tick()  # 4
    writer.compact()
    assert entry_offsets(store) == [4]
    return reader, stale


def test_an_append_into_a_truncated_slot_never_reaches_a_reader(store: S3ObjectStore) -> None:
    """A create-only PUT decided before a truncation and sent after it
    (a paused process, a slow request) lands in a slot the snapshot
    covers; a reader whose view ends just below must not fold it in place
    of the entry the snapshot holds (seed 16 of the soak: the view missed
    a ``delete_topic`` and kept a deleted incarnation live)."""
    reader, stale = _truncated_under(store)
    late = encode_controller_entry(EpochTick(tick_time(3)))
    assert stale.log.append_at(3, late), "the free slot takes the late write"
    view = reader.snapshot()
    assert "orders" not in view.topics, "the delete at 3 is in the snapshot"
    assert view == replayed(store)


def test_a_writer_that_last_saw_an_old_tail_appends_above_the_snapshot(
    store: S3ObjectStore,
) -> None:
    """A ticker taking the role back after others ticked and compacted."""
    _reader, stale = _truncated_under(store)
    assert stale.tick() == 5, "the next epoch, not a truncated slot"
    assert entry_offsets(store) == [4, 5]


class _CompactBeforePut(StoreWrapper):
    """The store, where other writers append twice and compact after the
    caller chose its slot and before its PUT reaches the bucket."""

    def __init__(self, store: S3ObjectStore) -> None:
        super().__init__(store)
        self.fired = False

    def put_if_absent(self, key: str, body: bytes, **kwargs: Any) -> str:
        if not self.fired and parse_log_entry_key(key, PREFIX) is not None:
            self.fired = True
            other = Controller(self._store, ROOT)
            other.tick()
            other.tick()
            other.compact()
        return self._store.put_if_absent(key, body, **kwargs)


def test_a_delete_whose_put_lands_in_a_truncated_slot_is_appended_again(
    store: S3ObjectStore,
) -> None:
    Controller(store, ROOT).create_topic("orders", 1)  # 1
    racing = _CompactBeforePut(store)
    deleter = Controller(racing, ROOT)  # type: ignore[arg-type]
    deleted_at = deleter.delete_topic("orders").deleted_at  # chose 2; 2, 3 ticks, compacted to 3
    assert racing.fired
    view = replayed(store)
    assert "orders" not in view.topics, "the delete took effect"
    assert view.deleted[("orders", 1)] == DeletedTopic("orders", 1, deleted_at)
    assert deleted_at == 4


def test_a_create_whose_put_lands_in_a_truncated_slot_is_appended_again(
    store: S3ObjectStore,
) -> None:
    Controller(store, ROOT).tick()  # 1
    racing = _CompactBeforePut(store)
    creator = Controller(racing, ROOT)  # type: ignore[arg-type]
    info = creator.create_topic("orders", 2)  # chose 2; 2, 3 ticks, compacted to 3
    assert racing.fired
    assert info.revision == 4
    assert replayed(store).topics["orders"] == info
