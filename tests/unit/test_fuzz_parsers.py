"""Every parser that sees outside input, fuzzed: any bytes or text gives a
value or the parser's declared error, never another exception (which would
crash a long-running process). Keys that parse are exactly the canonical
ones, so no odd spelling can ever be judged deletable.

Inputs mix raw noise with near-valid documents (valid ones with a field
dropped, retyped or replaced), which is where parsers usually break. The
public formats are also fuzzed from their JSON Schemas (docs/schemas/):
documents that fit must be read, documents that do not must raise the
reader's error.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochgc.config import load_config
from epochgc.errors import ConfigError, EpochGCError, InventoryError, RecordError
from epochgc.gc.control import decode_control, decode_status
from epochgc.gc.listing.knowledge import decode_knowledge
from epochgc.gc.presence import decode_presence
from epochgc.gc.run_report import decode_summary
from epochgc.leases.role_leases import decode_lease
from epochgc.storage.inventory import InventoryFile, parse_manifest
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
from epochgc.storage.l0_format import decode_records
from epochgc.watermarks.controller_codec import decode_controller_entry, decode_controller_snapshot
from epochgc.watermarks.layout import decode_layout_marker
from epochgc.watermarks.partition.codec import decode_command, decode_snapshot
from epochgc.watermarks.safe_epoch.reports import decode_report
from tests.support.inventory_files import read_data_file
from tests.support.schemas import NAMES, schema_errors

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


# --- documents derived from the published JSON Schemas (docs/schemas/) -------
#
# Strategies below build documents that fit the schemas (each example is
# checked against its schema before use); mutations then drop, retype or
# rename one field anywhere in it. The readers must parse every document
# that fits, and raise their declared error for every one that does not:
# the schemas say exactly what the readers accept, so another system that
# validates against them writes what epochgc reads.

ZONES = [UTC, timezone(timedelta(hours=2)), timezone(-timedelta(hours=5, minutes=30))]


@st.composite
def rfc3339(draw: st.DrawFn) -> str:
    moment = draw(
        st.datetimes(
            min_value=datetime(1970, 1, 1),
            max_value=datetime(2200, 1, 1),
            timezones=st.sampled_from(ZONES),
        )
    )
    text = moment.isoformat(timespec=draw(st.sampled_from(["seconds", "milliseconds"])))
    return text.replace("+00:00", "Z") if draw(st.booleans()) else text


def name_of(size: int) -> st.SearchStrategy[str]:
    return st.from_regex(rf"[A-Za-z0-9._-]{{1,{size}}}", fullmatch=True).filter(
        lambda n: n not in (".", "..")
    )


topics = name_of(249)
counts = st.integers(0, 2**63)
unknown_fields = st.dictionaries(
    st.text(min_size=1, max_size=8).map(lambda k: f"x-{k}"), json_values, max_size=2
)


def with_unknown(doc_strategy: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """Readers ignore fields they do not know: add some."""
    return st.builds(lambda doc, extra: {**extra, **doc}, doc_strategy, unknown_fields)


controller_entries = with_unknown(
    st.one_of(
        st.fixed_dictionaries(
            {
                "v": st.just(1),
                "type": st.just("create_topic"),
                "topic": topics,
                "partitions": st.integers(1, 2**40),
                "ts": rfc3339(),
            },
            optional={"config": st.dictionaries(st.text(max_size=10), json_values, max_size=3)},
        ),
        st.fixed_dictionaries(
            {"v": st.just(1), "type": st.just("delete_topic"), "topic": topics, "ts": rfc3339()}
        ),
        st.fixed_dictionaries({"v": st.just(1), "type": st.just("epoch_tick"), "ts": rfc3339()}),
    )
)


@st.composite
def controller_snapshots(draw: st.DrawFn) -> dict[str, Any]:
    """A snapshot that also keeps the cross-field rules the schema cannot say."""
    offset = draw(st.integers(0, 10**6))
    names = draw(st.lists(topics, max_size=4, unique=True))
    live = [
        {
            "topic": n,
            "revision": draw(st.integers(1, offset)),
            "partitions": draw(st.integers(1, 9)),
        }
        for n in names
        if offset >= 1
    ]
    deleted = []
    if offset >= 2:
        for name in draw(st.lists(topics, max_size=3)):
            revision = draw(st.integers(1, offset - 1))
            if (name, revision) in {(d["topic"], d["revision"]) for d in deleted} | {
                (t["topic"], t["revision"]) for t in live
            }:
                continue
            deleted.append(
                {
                    "topic": name,
                    "revision": revision,
                    "deleted_at": draw(st.integers(revision + 1, offset)),
                }
            )
    epochs = sorted(draw(st.sets(st.integers(1, max(offset, 1)), max_size=4))) if offset else []
    doc = {
        "v": 1,
        "offset": offset,
        "topics": live,
        "deleted_topics": deleted,
        "epoch_starts": [[e, draw(rfc3339())] for e in epochs],
    }
    if draw(st.booleans()):
        doc["older_epochs_started_by"] = draw(st.none() | rfc3339())
    return doc


stuck_causes = with_unknown(
    st.fixed_dictionaries(
        {
            "cause": st.sampled_from(["missing", "corrupt"]) | st.text(max_size=8),
            "key": st.text(max_size=40),
            "first_offset": st.integers(0, 10**12),
            "last_offset": st.integers(0, 10**12),
            "since": rfc3339(),
        },
        optional={"error": st.text(max_size=20)},
    )
)
report_entries = st.fixed_dictionaries(
    {
        "topic": topics,
        "revision": st.integers(1, 10**20 - 1),
        "partition": st.integers(0, 10**6),
        "term": counts,
        "safe_epoch": st.integers(-1, 10**18),
        "lro": st.integers(-1, 10**12),
        "max_applied_epoch": st.integers(0, 10**18),
        "previous_applied_epoch": st.integers(0, 10**18),
    },
    optional={"stuck": stuck_causes},
)
node_reports = with_unknown(
    st.fixed_dictionaries(
        {
            "v": st.just(2),
            "node": name_of(64),
            "generated_at": rfc3339(),
            "partitions": st.lists(with_unknown(report_entries), max_size=3),
        }
    )
)
run_summaries = with_unknown(
    st.fixed_dictionaries(
        {
            "v": st.sampled_from([1, 2]),
            "run_id": st.text(max_size=30),
            "engine": st.sampled_from(["local", "spark-listing", "spark-inventory"]),
            "dry_run": st.booleans(),
            "safe_epoch": st.integers(-1, 10**18),
            "controller_offset": st.integers(0, 10**18),
            "started_at": rfc3339(),
            "finished_at": rfc3339(),
            "success": st.booleans(),
            "listed": counts,
            "eligible": counts,
            "deleted": counts,
            "bytes_deleted": counts,
            "errors": counts,
        },
        optional={
            "skipped": st.dictionaries(st.text(max_size=12), counts, max_size=4),
            "requests": st.dictionaries(st.text(max_size=12), counts, max_size=4),
            "janitor": st.fixed_dictionaries(
                {"incarnations": counts, "objects_deleted": counts},
                optional={"complete": st.booleans()},
            )
            | st.just({}),
            "cost": st.fixed_dictionaries(
                {"requests_usd": st.floats(0, 1e6) | st.integers(0, 10**6)},
                optional={
                    "prices": st.dictionaries(
                        st.sampled_from(
                            [
                                "list_per_1000",
                                "delete_per_1000",
                                "get_per_1000",
                                "storage_per_gb_month",
                            ]
                        ),
                        st.floats(0, 10),
                    )
                },
            ),
            "shards": st.fixed_dictionaries(
                {"listed": counts, "full_sweep": st.booleans()}, optional={"present": counts}
            ),
        },
    )
)
control_documents = with_unknown(
    st.fixed_dictionaries(
        {
            "v": st.just(1),
            "paused": st.booleans(),
            "updated_at": rfc3339(),
            "reset_generation": counts,
        },
        optional={"reason": st.text(max_size=20), "updated_by": st.text(max_size=20)},
    )
)
optional_times = st.none() | rfc3339()
status_documents = with_unknown(
    st.fixed_dictionaries(
        {
            "v": st.just(1),
            "state": st.sampled_from(
                ["running", "paused", "safety_blocked", "stopping", "stopped"]
            ),
            "holder": st.text(max_size=30),
            "updated_at": rfc3339(),
        },
        optional={
            "safe_epoch": st.none() | st.integers(-1, 10**18),
            "cluster_epoch": st.none() | st.integers(0, 10**18),
            "last_run_id": st.none() | st.text(max_size=30),
            "last_outcome": st.none() | st.text(max_size=15),
            "last_success_at": optional_times,
            "last_round_at": optional_times,
            "next_round_at": optional_times,
            "detail": st.text(max_size=30),
        },
    )
)
presence_documents = with_unknown(
    st.fixed_dictionaries(
        {
            "v": st.just(1),
            "node": name_of(64),
            "holder": st.text(max_size=30),
            "role": st.sampled_from(["leader", "standby"]),
            "state": st.sampled_from(["running", "paused", "safety_blocked", "stopped"]),
            "started_at": rfc3339(),
            "updated_at": rfc3339(),
            "refresh_seconds": st.floats(0.001, 10**6) | st.integers(1, 10**6),
        },
        optional={"metrics": st.none() | st.text(max_size=30)},
    )
)
shard_facts = st.fixed_dictionaries(
    {"listed_at": rfc3339(), "safe_epoch": counts},
    optional={
        "lowest_epoch": st.none() | counts,
        "bytes_per_second": st.floats(0, 1e12) | st.integers(0, 10**12),
        "quiet_at": optional_times,
    },
)
shard_knowledge = with_unknown(
    st.fixed_dictionaries(
        {
            "v": st.just(1),
            "shards": st.dictionaries(st.integers(0, 999).map("{:03d}".format), shard_facts),
        },
        optional={"full_sweep_at": optional_times, "discovered_at": optional_times},
    )
)
layout_markers = with_unknown(
    st.fixed_dictionaries({"v": st.just(1), "layout": st.integers(1, 2**40)})
)

SCHEMA_READERS: list[tuple[str, st.SearchStrategy[Any], Callable[[bytes], object], bool]] = [
    # (schema, valid documents, reader, whether the schema says all the reader checks)
    ("controller-entry", controller_entries, decode_controller_entry, True),
    ("controller-snapshot", controller_snapshots(), decode_controller_snapshot, False),
    ("node-report", node_reports, decode_report, True),
    ("run-summary", run_summaries, decode_summary, True),
    ("control", control_documents, decode_control, True),
    ("layout-marker", layout_markers, lambda b: decode_layout_marker(b, "marker"), True),
    ("status", status_documents, decode_status, True),
    ("presence", presence_documents, lambda b: decode_presence(b, "presence"), True),
    ("shard-knowledge", shard_knowledge, decode_knowledge, True),
]
SCHEMA_IDS = [s[0] for s in SCHEMA_READERS]
BAD_NAMES = ["", ".", "..", "a/b", "orders\n", "x" * 250, "é", 7, None]


def containers(doc: Any) -> list[dict[str, Any]]:
    """Every JSON object in ``doc``, itself included."""
    if isinstance(doc, dict):
        return [doc, *(c for value in doc.values() for c in containers(value))]
    if isinstance(doc, list):
        return [c for item in doc for c in containers(item)]
    return []


@st.composite
def mutated(draw: st.DrawFn, documents: st.SearchStrategy[Any]) -> Any:
    doc = json.loads(json.dumps(draw(documents)))
    for _ in range(draw(st.integers(1, 2))):
        target = draw(st.sampled_from(containers(doc)))
        if not target:
            continue
        key = draw(st.sampled_from(sorted(target)))
        action = draw(st.sampled_from(["drop", "retype", "rename", "version", "negative"]))
        if action == "drop":
            del target[key]
        elif action == "retype":
            target[key] = draw(json_values)
        elif action == "rename":
            target[key] = draw(st.sampled_from(BAD_NAMES))
        elif action == "version":
            doc["v"] = draw(st.sampled_from([0, 1, 2, 3, -1, "1", None, 1.5, True]))
        else:
            target[key] = draw(st.integers(-(2**64), -1))
    return doc


def test_every_published_schema_has_a_fuzzed_reader() -> None:
    assert sorted(SCHEMA_IDS) == sorted(NAMES)


@pytest.mark.parametrize(("name", "documents", "read", "exact"), SCHEMA_READERS, ids=SCHEMA_IDS)
def test_documents_that_fit_the_schema_are_read(
    name: str, documents: st.SearchStrategy[Any], read: Callable[[bytes], object], exact: bool
) -> None:
    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
    @given(doc=documents)
    def check(doc: Any) -> None:
        assert schema_errors(name, doc) == []
        read(json.dumps(doc).encode())

    check()


@pytest.mark.parametrize(("name", "documents", "read", "exact"), SCHEMA_READERS, ids=SCHEMA_IDS)
def test_documents_that_do_not_fit_raise_the_readers_error(
    name: str, documents: st.SearchStrategy[Any], read: Callable[[bytes], object], exact: bool
) -> None:
    """Unfit: the reader's declared error, nothing else. Fit (after a
    harmless mutation, e.g. an optional field dropped): read, when the
    schema states everything the reader checks."""

    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    @given(doc=mutated(documents))
    def check(doc: Any) -> None:
        fits = not schema_errors(name, doc)
        legacy_report = name == "node-report" and doc.get("v") == 1 and doc["v"] is not True
        # A report entry's optional ``stuck`` object that does not fit is
        # dropped by the reader, as the schema's description says: it
        # cannot change M, so it spoils nothing.
        only_stuck_unfit = name == "node-report" and all(
            "/stuck" in error for error in schema_errors(name, doc)
        )
        try:
            read(json.dumps(doc).encode())
        except RecordError:
            assert not (fits and exact), f"fits {name} yet refused: {doc!r}"
            return
        assert fits or legacy_report or only_stuck_unfit, f"does not fit {name} yet read: {doc!r}"

    check()
