"""`epochgc check-store`: passes on S3 semantics, refuses a store that
ignores conditional headers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from epochgc.errors import BucketMissingError, StoreCapabilityError, StoreUnreachableError
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.probe import (
    ensure_store_capable,
    format_probe_table,
    run_probes,
    wait_until_reachable,
)
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.wiring.store import CapabilityCache
from tests.support.cli import run_cli
from tests.support.faults import RejectIfMatchStore
from tests.support.wrapping import StoreWrapper


def strip_conditional_headers(client: Any) -> None:
    """Model a proxy or S3-compatible store that drops If-None-Match and
    If-Match before the request is signed and sent (the request still goes
    over HTTP to the real endpoint)."""

    def strip(request: Any, **_kwargs: Any) -> None:
        for header in ("If-None-Match", "If-Match"):
            if header in request.headers:
                del request.headers[header]

    client.meta.events.register("before-sign.s3.PutObject", strip)


def test_all_probes_pass_on_the_embedded_s3(store: S3ObjectStore) -> None:
    results = run_probes(store, "epochgc")
    assert [r.name for r in results if not r.passed] == []
    assert len(results) == 6
    assert list(store.list_objects("epochgc/meta/probe/")) == [], "probes clean up"
    ensure_store_capable(store, "epochgc")


def test_a_store_that_ignores_conditional_headers_is_refused(s3_client, bucket: str) -> None:  # type: ignore[no-untyped-def]
    strip_conditional_headers(s3_client)
    store = S3ObjectStore(s3_client, bucket)
    results = {r.name: r for r in run_probes(store, "epochgc")}
    create_only = results["create-only put (If-None-Match: *)"]
    assert not create_only.passed
    assert "ignores If-None-Match" in create_only.detail
    assert not results["CAS put, stale etag (If-Match)"].passed
    assert not results["create-only race, two writers"].passed
    assert results["DeleteObjects of a missing key"].passed
    table = format_probe_table(list(results.values()), bucket)
    assert "store NOT usable" in table and "refuses to run" in table
    with pytest.raises(StoreCapabilityError, match="ignores If-None-Match"):
        ensure_store_capable(store, "epochgc")


def test_cli_check_store_passes_on_the_local_config() -> None:
    done = run_cli("check-store", "--config", "config/local.toml")
    assert done.returncode == 0, done.stderr
    assert "store OK" in done.stdout
    assert done.stdout.count("PASS") == 6


def test_cli_check_store_json() -> None:
    done = run_cli("check-store", "--config", "config/local.toml", "--json")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"  # the table names the probe
    report = json.loads(done.stdout)
    assert report["ok"] is True and len(report["probes"]) == 6


def test_cli_refuses_a_bad_config_before_doing_any_work(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[layout]\nroot = ""\n[store]\nembedded = true\n')
    done = run_cli("check-store", "--config", str(bad))
    assert done.returncode == 2
    assert str(bad) in done.stderr and "layout.root" in done.stderr
    assert "embedded S3 listening" not in done.stderr


def test_cli_never_logs_credentials() -> None:
    done = run_cli(
        "check-store",
        "--config",
        "config/local.toml",
        "--log-level",
        "DEBUG",
        env={
            "EPOCHGC_STORE__SECRET_ACCESS_KEY": "TOPSECRETVALUE",
            "EPOCHGC_STORE__ACCESS_KEY_ID": "AKIDVALUE",
        },
    )
    assert done.returncode == 0, done.stderr
    assert "TOPSECRETVALUE" not in done.stdout + done.stderr
    assert "epochgc-embedded-secret" not in done.stderr
    assert "Authorization" not in done.stderr


def test_embedded_s3_in_its_own_process() -> None:
    server = EmbeddedS3(bucket="own-process", in_process=False)
    server.start()
    try:
        store = S3ObjectStore(make_s3_client(server.client_settings()), "own-process")
        assert [r.name for r in run_probes(store, "epochgc") if not r.passed] == []
    finally:
        server.stop()
    server.stop()  # idempotent


def test_a_store_that_rejects_its_own_etags_is_refused_saying_so(store: S3ObjectStore) -> None:
    rgw = RejectIfMatchStore(store)
    results = {r.name: r for r in run_probes(rgw, "epochgc")}  # type: ignore[arg-type]
    cas = results["CAS put, current etag (If-Match)"]
    assert not cas.passed
    assert "the store rejected (412) the ETag it had just returned" in cas.detail
    assert results["create-only put (If-None-Match: *)"].passed
    with pytest.raises(StoreCapabilityError, match=r"rejected \(412\) the ETag") as info:
        ensure_store_capable(rgw, "epochgc")  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    assert "store NOT usable" in info.value.table


def test_the_capability_gate_is_cheap_and_runs_once_per_store(store: S3ObjectStore) -> None:
    stats = RequestStats()
    stats.attach(store.client)
    cache = CapabilityCache()
    cache.ensure(store, "epochgc", "http://embedded")
    first = stats.total()
    assert first <= 25, stats.by_operation()
    cache.ensure(store, "epochgc", "http://embedded")
    assert stats.total() == first, "a second check of the same store costs nothing"
    assert list(store.list_objects("epochgc/meta/probe/")) == []


def test_a_refused_store_is_probed_again_next_time(store: S3ObjectStore) -> None:
    cache = CapabilityCache()
    rgw = RejectIfMatchStore(store)
    for _ in range(2):
        with pytest.raises(StoreCapabilityError):
            cache.ensure(rgw, "epochgc", "http://rgw")  # type: ignore[arg-type]
    # Per round: the quoted and the bare form in the CAS probe, then the
    # stale-ETag probe's first write.
    assert rgw.rejected == 6, "a failed verdict is not cached: the store may be fixed"


def test_check_store_on_a_missing_bucket_raises_bucket_missing(s3_client) -> None:  # type: ignore[no-untyped-def]
    store = S3ObjectStore(s3_client, "no-such-bucket-for-probes")
    with pytest.raises(BucketMissingError):
        run_probes(store, "epochgc")


class _DownThenUp(StoreWrapper):
    """Unreachable for the first ``down`` LISTs."""

    def __init__(self, store: Any, down: int) -> None:
        super().__init__(store)
        self.down = down

    def list_pages(self, prefix: str, **kwargs: Any) -> Any:
        if self.down > 0:
            self.down -= 1
            raise StoreUnreachableError("cannot reach the store at URL: connection refused", None)
        return self._store.list_pages(prefix, **kwargs)


def test_wait_polls_until_the_store_answers_and_gives_up_after_its_time() -> None:
    clock = VirtualClock()
    store = _DownThenUp(MemoryStore(clock), down=3)
    began = clock.monotonic()
    wait_until_reachable(store, "epochgc", 5.0, sleep=clock.advance, monotonic=clock.monotonic)
    assert store.down == 0 and clock.monotonic() - began == pytest.approx(1.5)
    never = _DownThenUp(MemoryStore(clock), down=100)
    with pytest.raises(StoreUnreachableError):
        wait_until_reachable(never, "epochgc", 5.0, sleep=clock.advance, monotonic=clock.monotonic)
    assert never.down == 100 - 11  # 0.5 s apart for 5 s, then one last try


class _BucketLater(StoreWrapper):
    """Answers, but without its bucket, for the first ``missing`` LISTs: a
    server that listens a moment before it has created its bucket."""

    def __init__(self, store: Any, missing: int) -> None:
        super().__init__(store)
        self.missing = missing

    def list_pages(self, prefix: str, **kwargs: Any) -> Any:
        if self.missing > 0:
            self.missing -= 1
            raise BucketMissingError("bucket 'epochgc' does not exist at URL")
        return self._store.list_pages(prefix, **kwargs)


def test_wait_also_waits_for_a_bucket_the_server_has_yet_to_create() -> None:
    # `epochgc embedded-s3 &` then `check-store --wait 20` failed with a
    # missing bucket when the server answered before creating it.
    clock = VirtualClock()
    store = _BucketLater(MemoryStore(clock), missing=2)
    wait_until_reachable(store, "epochgc", 5.0, sleep=clock.advance, monotonic=clock.monotonic)
    assert store.missing == 0
    never = _BucketLater(MemoryStore(clock), missing=100)
    with pytest.raises(BucketMissingError):
        wait_until_reachable(never, "epochgc", 5.0, sleep=clock.advance, monotonic=clock.monotonic)
