"""Every parser that sees outside input, fuzzed: any bytes or text gives a
value or the parser's declared error, never another exception (which would
crash a long-running process). Keys that parse are exactly the canonical
ones, so no odd spelling can ever be judged deletable.

Inputs mix raw noise with near-valid documents (valid ones with a field
dropped, retyped or replaced), which is where parsers usually break.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochgc.config import load_config
from epochgc.errors import ConfigError, EpochGCError, RecordError
from epochgc.gc.control import decode_control, decode_status
from epochgc.gc.run_report import decode_summary
from epochgc.ingest.l0_format import decode_records
from epochgc.storage.inventory import (
    InventoryError,
    InventoryFile,
    parse_manifest,
    read_data_file,
)
from epochgc.storage.keys import (
    PartitionId,
    encode_l0_key,
    encode_l1_key,
    encode_log_entry_key,
    parse_l0_key,
    parse_l1_key,
    parse_log_entry_key,
    parse_report_key,
)
from epochgc.watermarks.leases import decode_lease
from epochgc.watermarks.records import (
    decode_command,
    decode_controller_entry,
    decode_controller_snapshot,
    decode_snapshot,
)
from epochgc.watermarks.reports import decode_report

ROOT = "epochgc"
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)

VALID: dict[str, dict[str, Any]] = {
    "controller": {
        "v": 1,
        "type": "create_topic",
        "topic": "orders",
        "partitions": 4,
        "config": {},
        "ts": "2026-11-22T03:00:00Z",
    },
    "controller_snapshot": {
        "v": 1,
        "offset": 12,
        "topics": [{"topic": "orders", "revision": 9, "partitions": 4, "config": {}}],
        "deleted_topics": [{"topic": "orders", "revision": 3, "deleted_at": 7}],
        "epoch_starts": [[11, "2026-11-22T03:00:00Z"], [12, "2026-11-22T03:01:00Z"]],
        "older_epochs_started_by": "2026-11-22T02:59:00Z",
    },
    "report": {
        "v": 1,
        "node": "n-1",
        "generated_at": "2026-11-22T03:00:05Z",
        "partitions": [
            {
                "topic": "orders",
                "partition": 0,
                "term": 3,
                "safe_epoch": 41,
                "lro": 12,
                "max_applied_epoch": 45,
                "previous_applied_epoch": 43,
            }
        ],
    },
    "lease": {"v": 1, "holder": "n/1", "term": 2, "expires_at": "2026-11-22T03:00:05.000Z"},
    "control": {
        "v": 1,
        "paused": True,
        "reason": "",
        "updated_by": "op",
        "updated_at": "2026-11-22T03:00:05Z",
        "reset_generation": 1,
    },
    "status": {"v": 1, "state": "running", "holder": "h", "updated_at": "2026-11-22T03:00:05Z"},
    "summary": {
        "v": 1,
        "run_id": "r",
        "engine": "local",
        "dry_run": False,
        "safe_epoch": 80,
        "controller_offset": 97,
        "started_at": "2026-11-22T03:00:05Z",
        "finished_at": "2026-11-22T03:00:06Z",
        "success": True,
        "listed": 1,
        "eligible": 1,
        "deleted": 1,
        "bytes_deleted": 1,
        "skipped": {},
        "errors": 0,
        "requests": {},
    },
    "command": {"v": 1, "type": "advance_reconciled", "term": 1, "seq": 2, "lro": 5},
    "manifest": {
        "sourceBucket": "b",
        "destinationBucket": "arn:aws:s3:::d",
        "version": "2016-11-30",
        "creationTimestamp": "1",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate",
        "files": [{"key": "k", "size": 1, "MD5checksum": "00"}],
    },
}


@st.composite
def near_valid(draw: st.DrawFn, kind: str) -> bytes:
    doc = json.loads(json.dumps(VALID[kind]))
    for _ in range(draw(st.integers(0, 3))):
        if not doc:
            break
        key = draw(st.sampled_from(sorted(doc)))
        action = draw(st.sampled_from(["drop", "replace", "version"]))
        if action == "drop":
            del doc[key]
        elif action == "replace":
            doc[key] = draw(json_values)
        else:
            doc["v"] = draw(st.sampled_from([0, 2, -1, "1", None, 1.0, True]))
    return json.dumps(doc).encode()


def documents(kind: str) -> st.SearchStrategy[bytes]:
    return (
        st.binary(max_size=200)
        | near_valid(kind)
        | json_values.map(lambda v: json.dumps(v).encode())
    )


PARSERS: list[tuple[str, Callable[[bytes], object], type[Exception]]] = [
    ("controller", decode_controller_entry, RecordError),
    ("controller_snapshot", decode_controller_snapshot, RecordError),
    ("report", decode_report, RecordError),
    ("lease", lambda b: decode_lease(b, "lease"), RecordError),
    ("control", decode_control, RecordError),
    ("status", decode_status, RecordError),
    ("summary", decode_summary, RecordError),
    ("command", decode_command, RecordError),
    ("manifest", lambda b: parse_manifest(b, "manifest.json"), InventoryError),
]


@pytest.mark.parametrize(("kind", "parse", "error"), PARSERS, ids=[p[0] for p in PARSERS])
def test_documents_parse_or_raise_their_error(
    kind: str, parse: Callable[[bytes], object], error: type[Exception]
) -> None:
    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    @given(data=documents(kind))
    def check(data: bytes) -> None:
        with contextlib.suppress(error):
            parse(data)

    check()


@settings(max_examples=300)
@given(data=st.binary(max_size=300))
def test_snapshots_parse_or_raise(data: bytes) -> None:
    with contextlib.suppress(RecordError):
        decode_snapshot(data)


@given(data=st.binary(max_size=200), expected=st.none() | st.integers(0, 5))
def test_l0_record_chunks_parse_or_raise(data: bytes, expected: int | None) -> None:
    with contextlib.suppress(RecordError):
        decode_records(data, expected)


def mutated_keys() -> st.SearchStrategy[str]:
    good = st.builds(
        lambda s, e, u: encode_l0_key(ROOT, s, e, str(uuid.UUID(int=u))),
        st.integers(0, 999),
        st.integers(0, 10**18 - 1),
        st.integers(0, 2**128 - 1),
    )
    return st.one_of(
        good,
        st.text(max_size=80),
        st.builds(
            lambda k, i, c: k[:i] + c + k[i + 1 :], good, st.integers(0, 80), st.text(max_size=2)
        ),
        st.builds(lambda t: f"{ROOT}/l0/{t}", st.text(max_size=60)),
    )


@settings(max_examples=500)
@given(key=mutated_keys())
def test_only_canonical_l0_keys_parse(key: str) -> None:
    parsed = parse_l0_key(key, ROOT)
    if parsed is not None:
        assert encode_l0_key(ROOT, parsed.shard, parsed.epoch, parsed.object_id) == key


@settings(max_examples=300)
@given(
    key=st.text(max_size=120)
    | st.builds(
        lambda a, b: encode_l1_key(ROOT, PartitionId("orders", 7, 3), a, a + b, str(uuid.uuid4())),
        st.integers(0, 10**9),
        st.integers(0, 10**9),
    )
)
def test_only_canonical_l1_log_and_report_keys_parse(key: str) -> None:
    l1 = parse_l1_key(key, ROOT)
    if l1 is not None:
        assert (
            encode_l1_key(ROOT, l1.partition_id, l1.first_offset, l1.last_offset, l1.object_id)
            == key
        )
    prefix = f"{ROOT}/meta/partitions/orders/7/3/log/"
    offset = parse_log_entry_key(key, prefix)
    if offset is not None:
        assert encode_log_entry_key(prefix, offset) == key
    node = parse_report_key(key, ROOT)
    if node is not None:
        assert key == f"{ROOT}/meta/reports/{node}"


CSV_SCHEMA = "Bucket, Key, Size, LastModifiedDate"


@settings(max_examples=200)
@given(
    rows=st.lists(st.lists(st.text(max_size=15), max_size=6), max_size=6),
    raw=st.booleans(),
    noise=st.binary(max_size=100),
)
def test_inventory_csv_rows_parse_or_raise(rows: list[list[str]], raw: bool, noise: bytes) -> None:
    text = "".join(",".join(json.dumps(c) for c in row) + "\n" for row in rows)
    body = noise if raw else gzip.compress(text.encode())
    manifest = parse_manifest(json.dumps(VALID["manifest"]).encode(), "m")
    entry = InventoryFile("f", len(body), hashlib.md5(body).hexdigest())
    with contextlib.suppress(InventoryError):
        read_data_file(body, manifest, entry)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(max_size=200)
    | st.builds(
        lambda section, key, value: f"[{section}]\n{key} = {value}\n",
        st.sampled_from(["store", "gc", "daemon", "metrics", "nope", "inventory"]),
        st.sampled_from(
            ["bucket", "min_object_age_seconds", "listen", "pushgateway", "x", "interval_seconds"]
        ),
        st.sampled_from(['"a"', "1", "-1", "1e309", "true", '"127.0.0.1:99999"', "[]", '""']),
    )
)
def test_config_files_load_or_raise_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.toml"
    path.write_text(text)
    with contextlib.suppress(ConfigError):
        load_config(path, env={})


def test_the_error_types_are_epochgc_errors() -> None:
    """Long-running loops catch ``EpochGCError``: every parser error must be one."""
    for _kind, _parse, error in PARSERS:
        assert issubclass(error, EpochGCError)
