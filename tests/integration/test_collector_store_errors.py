"""The collector under store errors: a store that fails (SlowDown brown-out,
a missing bucket) fails rounds, however many, and never makes the
collector ``safety_blocked``; it collects again once the store recovers.
Only content it cannot trust (a controller entry that does not parse)
blocks it, and the block names that cause."""

from __future__ import annotations

import uuid
from datetime import timedelta

from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import Collector, RoundOutcome
from epochgc.gc.control import CollectorState
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import controller_log_prefix, encode_l0_key, encode_log_entry_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from tests.conftest import FAST_RETRIES
from tests.support.aws_env import embedded_keys_at
from tests.support.faults import inject_http_errors
from tests.support.moto_seed import seed_objects

ROOT = "epochgc"
SETTINGS = CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0)


def _world(store: S3ObjectStore, bucket: str) -> None:
    """No topics, controller at offset 3 (so M = 3), six L0 objects of
    epochs 1..3."""
    controller = Controller(store, ROOT)
    for _ in range(3):
        controller.tick()
    seed_objects(
        bucket,
        [encode_l0_key(ROOT, s, e, str(uuid.uuid4())) for s in range(2) for e in range(1, 4)],
    )


def _collector(store: S3ObjectStore) -> Collector:
    return Collector(store, RequestStats(), ROOT, SETTINGS, blocked_after=2)


def test_a_store_brown_out_fails_rounds_but_never_blocks(store: S3ObjectStore, bucket: str) -> None:
    _world(store, bucket)
    collector = _collector(store)
    injectors = [
        inject_http_errors(store.client, op, 10_000, status=503, code="SlowDown")
        for op in ("GetObject", "ListObjectsV2")
    ]
    for _ in range(5):
        report = collector.run_round()
        assert report.outcome is RoundOutcome.FAILED, report
        assert report.error is not None and "SlowDown" in report.error
        assert collector.state is CollectorState.RUNNING
    for injector in injectors:
        injector.remove()
    report = collector.run_round()
    assert report.outcome is RoundOutcome.COLLECTED, report
    assert list(store.list_objects(f"{ROOT}/l0/")) == []


def _fails_rounds_naming(collector: Collector, cause: str) -> None:
    """Four rounds fail, each naming ``cause``; the collector stays running."""
    for _ in range(4):
        report = collector.run_round()
        assert report.outcome is RoundOutcome.FAILED, report
        assert report.error is not None and cause in report.error
        assert collector.state is CollectorState.RUNNING


def test_a_missing_bucket_fails_rounds_naming_it_and_never_blocks(
    s3_server: EmbeddedS3,
) -> None:
    name = f"t-{uuid.uuid4().hex[:16]}"
    store = S3ObjectStore(
        make_s3_client(s3_server.client_settings()), name, retry_policy=FAST_RETRIES
    )
    collector = _collector(store)
    _fails_rounds_naming(collector, "does not exist")
    s3_server.create_bucket(name)
    _world(store, name)
    assert collector.run_round().outcome is RoundOutcome.COLLECTED


def test_an_unparseable_controller_entry_blocks_and_says_why(
    store: S3ObjectStore, bucket: str
) -> None:
    _world(store, bucket)
    store.put(encode_log_entry_key(controller_log_prefix(ROOT), 4), b"{not json")
    collector = _collector(store)
    first = collector.run_round()
    assert first.outcome is RoundOutcome.FAILED
    second = collector.run_round()
    assert second.outcome is RoundOutcome.BLOCKED
    assert collector.state is CollectorState.SAFETY_BLOCKED
    assert "controller entry 4: not UTF-8 JSON" in collector.blocked_reason
    later = collector.run_round()
    assert later.outcome is RoundOutcome.BLOCKED
    assert later.error is not None and "controller entry 4" in later.error


def test_a_refused_connection_fails_rounds_and_never_blocks() -> None:
    settings = embedded_keys_at("http://127.0.0.1:1")
    store = S3ObjectStore(make_s3_client(settings), "b-refused", retry_policy=FAST_RETRIES)
    _fails_rounds_naming(_collector(store), "cannot reach the store at http://127.0.0.1:1")
