"""The GC daemon on the embedded S3: lease hand-over between two daemons,
a pause that survives a restart, safety_blocked until reset, and SIGTERM
mid-sweep (a real process) exiting cleanly within 10 s."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from epochgc.errors import NotFoundError
from epochgc.gc.control import CollectorState, read_status, request_reset
from epochgc.gc.daemon.scheduler import GC_LEASE, DaemonSettings, GcDaemon
from epochgc.leases.role_leases import LeaseManager
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import (
    controller_log_prefix,
    encode_l0_key,
    encode_log_entry_key,
    parse_l0_key,
)
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import CompactionPolicy, Controller
from tests.support.cli import run_cli, start_cli
from tests.support.config_files import gc_sections, write_server_config
from tests.support.daemon_settings import quick_daemon_settings
from tests.support.moto_seed import seed_objects
from tests.support.waiting import wait_for

ROOT = "epochgc"
SHARDS = 4


def settings(node_id: str, **overrides: object) -> DaemonSettings:
    """Quick daemon settings that check the reports every second and serve
    metrics on a free port."""
    served = {"reports_check_seconds": 1.0, "metrics_listen": "127.0.0.1:0"}
    return quick_daemon_settings(node_id, **(served | overrides))


def seed_epochs(bucket: str, epochs: range, per_shard: int = 3) -> list[str]:
    keys = [
        encode_l0_key(ROOT, s, e, str(uuid.uuid4()))
        for s in range(SHARDS)
        for e in epochs
        for _ in range(per_shard)
    ]
    seed_objects(bucket, keys)
    return keys


def epochs_left(store: S3ObjectStore) -> set[int]:
    return {
        parsed.epoch
        for o in store.list_objects(f"{ROOT}/l0/")
        if (parsed := parse_l0_key(o.key, ROOT)) is not None
    }


def exists(store: S3ObjectStore, key: str) -> bool:
    try:
        store.head(key)
    except NotFoundError:
        return False
    return True


@pytest.fixture
def daemons(store: S3ObjectStore) -> Iterator[Callable[[str], GcDaemon]]:
    started: list[GcDaemon] = []

    def start(node_id: str, **overrides: object) -> GcDaemon:
        daemon = GcDaemon(store, RequestStats(), ROOT, settings(node_id, **overrides))
        daemon.start()
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


def advance(store: S3ObjectStore, to: int) -> None:
    Controller(store, ROOT).advance_to(to)


def test_lease_hands_over_between_two_daemons(
    store: S3ObjectStore, bucket: str, daemons: Callable[..., GcDaemon]
) -> None:
    advance(store, 5)  # no topics: M = controller offset = 5
    seed_epochs(bucket, range(1, 9))
    first = daemons("gc-a")
    wait_for(lambda: epochs_left(store) == {6, 7, 8}, what="first daemon collecting up to M=5")
    second = daemons("gc-b")
    time.sleep(1.0)
    assert first.is_leader and not second.is_leader
    assert second.rounds == 0, "a standby daemon must not run rounds"

    first.stop()
    wait_for(lambda: second.is_leader, timeout=5, what="standby taking the released lease")
    advance(store, 8)
    wait_for(lambda: epochs_left(store) == set(), what="second daemon collecting up to M=8")
    holder = LeaseManager.read_holder(store, ROOT, GC_LEASE)
    assert holder is not None and holder.holder == second.leases.holder
    assert first.collector.state is CollectorState.STOPPED


def test_pause_survives_a_daemon_restart(
    tmp_path: Path,
    s3_server: EmbeddedS3,
    store: S3ObjectStore,
    bucket: str,
    daemons: Callable[..., GcDaemon],
) -> None:
    config = write_server_config(
        tmp_path / "gc.toml", s3_server.endpoint_url, bucket, f"[layout]\nl0_shards = {SHARDS}\n"
    )
    advance(store, 3)
    first = daemons("gc-a")
    wait_for(lambda: first.rounds > 0, what="a first round")
    paused = run_cli("gc", "pause", "--reason", "bucket migration", "--config", str(config))
    assert paused.returncode == 0, paused.stderr
    wait_for(lambda: first.collector.state is CollectorState.PAUSED, what="pause seen")
    first.stop()

    seed_epochs(bucket, range(1, 4))
    second = daemons("gc-b")
    wait_for(lambda: second.is_leader and second.rounds >= 3, what="rounds while paused")
    assert second.collector.state is CollectorState.PAUSED
    assert epochs_left(store) == {1, 2, 3}, "a paused collector deleted objects"
    status = json.loads(run_cli("gc", "status", "--config", str(config), "--json").stdout)
    assert status["control"]["paused"] is True
    assert status["control"]["reason"] == "bucket migration"
    assert status["daemon"]["state"] == "paused"
    assert status["lease"]["holder"] == second.leases.holder

    assert run_cli("gc", "resume", "--config", str(config)).returncode == 0
    wait_for(lambda: epochs_left(store) == set(), what="deletion after resume")
    assert second.collector.state is CollectorState.RUNNING


def test_untrusted_controller_blocks_until_reset(
    store: S3ObjectStore, bucket: str, daemons: Callable[..., GcDaemon]
) -> None:
    advance(store, 3)
    seed_epochs(bucket, range(1, 3))
    bad_key = encode_log_entry_key(controller_log_prefix(ROOT), 4)
    store.put(bad_key, b"{not json")
    daemon = daemons("gc-a", blocked_after_failures=2)
    wait_for(lambda: daemon.collector.state is CollectorState.SAFETY_BLOCKED, what="safety_blocked")
    with pytest.raises(urllib.error.HTTPError) as health:
        urllib.request.urlopen(f"{daemon.metrics_url}/healthz", timeout=5)
    assert health.value.code == 503
    assert json.loads(health.value.read())["state"] == "safety_blocked"
    metrics = urllib.request.urlopen(f"{daemon.metrics_url}/metrics", timeout=5).read().decode()
    assert 'epochgc_collector_state{state="safety_blocked"} 1.0' in metrics

    # The status document is written when the round that blocked ends, just
    # after the collector's state changes: wait for it, then read it.
    def stored_state() -> CollectorState | None:
        status = read_status(store, ROOT)
        return None if status is None else status.state

    wait_for(
        lambda: stored_state() is CollectorState.SAFETY_BLOCKED,
        what="the status document to say safety_blocked",
    )

    # Fixing the entry is not enough: the block is sticky until an operator resets.
    store.put(bad_key, b'{"v": 1, "type": "epoch_tick", "ts": "2026-11-22T03:00:00Z"}')
    time.sleep(1.0)
    assert epochs_left(store) == {1, 2}
    request_reset(store, ROOT, by="test", now=datetime.now(UTC))
    wait_for(lambda: epochs_left(store) == set(), what="deletion after reset")
    assert daemon.collector.state is CollectorState.RUNNING
    assert urllib.request.urlopen(f"{daemon.metrics_url}/healthz", timeout=5).status == 200


def test_the_leader_compacts_the_controller_log_on_schedule(
    store: S3ObjectStore, daemons: Callable[..., GcDaemon]
) -> None:
    advance(store, 30)
    policy = CompactionPolicy(interval_seconds=0.3, min_entries=10)
    leader = daemons("gc-a", compaction=policy)
    wait_for(lambda: leader.is_leader, what="the first daemon taking the lease")
    standby = daemons("gc-b", compaction=policy)
    wait_for(lambda: leader.last_compaction is not None, what="a compaction by the leader")
    prefix = controller_log_prefix(ROOT)
    wait_for(
        lambda: (
            [o.key for o in store.list_objects(prefix)]
            == [encode_log_entry_key(prefix, 30), f"{prefix}snapshot"]
        ),
        what="entries below the newest deleted",
    )
    assert Controller(store, ROOT).snapshot().offset == 30
    time.sleep(1.0)
    assert standby.last_compaction is None, "a standby daemon never compacts"
    last = leader.last_compaction
    assert last is not None and last.skipped, "fewer than min_entries new entries: skipped"


@pytest.mark.serial
def test_sigterm_mid_sweep_exits_cleanly_within_10_seconds(
    tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    advance(store, 2)
    keys = seed_epochs(bucket, range(1, 3), per_shard=2500)  # 20,000 eligible objects
    config = write_server_config(
        tmp_path / "gc.toml",
        s3_server.endpoint_url,
        bucket,
        gc_sections(
            # 1,000 keys/s: the sweep needs ~20 s, so SIGTERM lands in the middle.
            "rate_limit_keys_per_second = 1000.0\n",
            shards=SHARDS,
        )
        + "[epoch]\nticker = false\n[daemon]\ninterval_seconds = 1.0\n"
        '[metrics]\nlisten = "127.0.0.1:0"\n',
    )
    proc = start_cli("daemon", "--config", str(config))
    try:
        first_listed = min(k for k in keys if parse_l0_key(k, ROOT).shard == 0)  # type: ignore[union-attr]
        wait_for(lambda: not exists(store, first_listed), timeout=30, what="the first batch")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert elapsed < 10
    left = len(list(store.list_objects(f"{ROOT}/l0/")))
    assert 0 < left < len(keys), "SIGTERM should stop the sweep part-way"
    lease = LeaseManager.read_holder(store, ROOT, GC_LEASE)
    assert lease is not None and lease.expires_at <= datetime.now(UTC), "lease not released"
    status = read_status(store, ROOT)
    assert status is not None and status.state is CollectorState.STOPPED
    assert "gc daemon stopped" in out
