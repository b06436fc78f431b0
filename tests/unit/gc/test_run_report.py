"""summary.json against the public contract (docs/contract.md, "Run summary (version 2)")."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest

from epochgc.errors import MalformedRecordError, UnsupportedVersionError
from epochgc.gc.listing.cost import Prices
from epochgc.gc.run_report import (
    RunShards,
    RunSummary,
    decode_summary,
    encode_summary,
    new_run_id,
    recent_runs,
    unparseable_note,
    write_summary,
)
from epochgc.simulate.memory_store import MemoryStore

V1 = b"""{"v": 1, "run_id": "r-1", "engine": "local",
 "dry_run": false, "safe_epoch": 80, "controller_offset": 97,
 "started_at": "2026-11-22T03:00:00Z", "finished_at": "2026-11-22T03:01:00Z", "success": true,
 "listed": 50000, "eligible": 40000, "deleted": 40000, "bytes_deleted": 40960000,
 "skipped": {"too_young": 0, "above_safe_epoch": 10000, "unparseable": 0, "outside_root": 0},
 "errors": 0, "requests": {"ListObjectsV2": 52, "DeleteObjects": 40}}"""

CONTRACT = V1.replace(b'"v": 1', b'"v": 2').replace(
    b"}}", b'}, "janitor": {"incarnations": 1, "objects_deleted": 12, "complete": true}}'
)


def test_the_contract_example_round_trips_field_for_field() -> None:
    summary = decode_summary(CONTRACT)
    assert summary.safe_epoch == 80 and summary.skipped["above_safe_epoch"] == 10000
    assert summary.janitor.objects_deleted == 12 and summary.janitor.incarnations == 1
    assert json.loads(encode_summary(summary)) == json.loads(CONTRACT)


def test_a_v1_summary_reads_as_a_run_whose_janitor_did_nothing() -> None:
    summary = decode_summary(V1)
    assert summary.janitor.objects_deleted == 0 and summary.janitor.complete


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"v": 3}, UnsupportedVersionError),
        ({"janitor": []}, MalformedRecordError),
        ({"janitor": {"objects_deleted": -1}}, MalformedRecordError),
        ({"success": "yes"}, MalformedRecordError),
        ({"deleted": -1}, MalformedRecordError),
        ({"started_at": "today"}, MalformedRecordError),
        ({"skipped": []}, MalformedRecordError),
        ({"unparseable_keys": "a/b"}, MalformedRecordError),
        ({"unparseable_keys": [1]}, MalformedRecordError),
        ({"shards": {"listed": 1, "full_sweep": False, "why": "hunch"}}, MalformedRecordError),
        ({"shards": {"listed": 1, "full_sweep": False, "due": -1}}, MalformedRecordError),
    ],
)
def test_bad_summaries_are_refused(change: dict[str, object], error: type[Exception]) -> None:
    doc = json.loads(CONTRACT)
    doc.update(change)
    with pytest.raises(error):
        decode_summary(json.dumps(doc).encode())


def test_run_ids_sort_by_start_time() -> None:
    early = new_run_id(datetime(2026, 11, 22, 3, 0, 0, tzinfo=UTC))
    late = new_run_id(datetime(2026, 11, 22, 3, 0, 1, tzinfo=UTC))
    assert early < late and early.startswith("20261122T030000Z-")


def test_a_failed_runs_cause_and_failed_files_round_trip_and_are_absent_otherwise() -> None:
    at = datetime(2026, 11, 24, tzinfo=UTC)
    ok = RunSummary("r", "spark-inventory", False, 1, 2, at, at, True, 0, 0, 0, 0, {}, 0)
    assert "cause" not in json.loads(encode_summary(ok))
    assert "failed_files" not in json.loads(encode_summary(ok))
    failed = dataclasses.replace(
        ok, success=False, cause="spark job failed: X", failed_files=(("inv/a.csv.gz", "boom"),)
    )
    back = decode_summary(encode_summary(failed))
    assert back.cause == "spark job failed: X"
    assert back.failed_files == (("inv/a.csv.gz", "boom"),)


def test_the_shards_reason_and_the_unparseable_keys_round_trip_and_read_as_a_person_would() -> None:
    at = datetime(2026, 11, 24, tzinfo=UTC)
    ok = RunSummary("r", "local", False, 1, 2, at, at, True, 9, 0, 0, 0, {"unparseable": 7}, 0)
    scheduled = dataclasses.replace(
        ok,
        shards=RunShards(16, 3, False, "schedule", new=1, due=2, not_due=10, quiet=3),
        unparseable_keys=("root/l0/000/mine.parquet",),
    )
    back = decode_summary(encode_summary(scheduled))
    assert back.shards == scheduled.shards and back.unparseable_keys == scheduled.unparseable_keys
    assert back.shards is not None and back.shards.describe() == (
        "listed 3 of 16 present by the cost schedule: 2 due, 1 new; 10 not due yet, "
        "3 holding nothing at or below M (shards discovered)"
    )
    assert unparseable_note(back) == (
        "7 keys under l0/ that do not parse as L0 keys, never deleted: root/l0/000/mine.parquet"
    )
    assert unparseable_note(ok) == "7 keys under l0/ that do not parse as L0 keys, never deleted"
    assert unparseable_note(dataclasses.replace(ok, skipped={"unparseable": 0})) is None
    before = json.loads(encode_summary(dataclasses.replace(ok, shards=RunShards(16, 16, True))))
    assert before["shards"] == {"listed": 16, "full_sweep": True, "present": 16}
    assert "unparseable_keys" not in before, "absent when there are none"


def test_recent_runs_are_priced_and_an_unreadable_summary_is_a_row_of_its_own() -> None:
    store = MemoryStore()
    unpriced = decode_summary(CONTRACT)  # written before cost was recorded
    write_summary(store, "epochgc", unpriced)
    priced = dataclasses.replace(unpriced, run_id="r-2", cost_usd=0.5, bytes_deleted=0)
    write_summary(store, "epochgc", priced)
    store.put("epochgc/gc/runs/r-3/plan.parquet", b"")  # running: no summary yet
    store.put("epochgc/gc/runs/r-4/summary.json", b"{}")

    rows = recent_runs(store, "epochgc", Prices(list_per_1000=1.0), limit=3)

    assert [r["run_id"] for r in rows] == ["r-2", "r-3", "r-4"], "the newest 3, oldest first"
    assert (rows[0]["cost_usd"], rows[0]["usd_per_gb"]) == (0.5, None)
    assert set(rows[1]) == {"run_id", "error"} and set(rows[2]) == {"run_id", "error"}
    first = recent_runs(store, "epochgc", Prices(list_per_1000=1.0))[0]
    assert first["cost_usd"] == pytest.approx(52 / 1000), "priced from its requests"
    assert first["usd_per_gb"] == pytest.approx(52 / 1000 / (40960000 / 2**30))
    assert first["deleted"] == 40000 and first["janitor"] == json.loads(CONTRACT)["janitor"]
