"""One epoch ticker per cluster, on the embedded S3 (docs/operating.md,
"The processes", "Where the ticker runs"): N ticker-eligible processes
give one epoch per interval, not N.

Timing bounds are generous on the slow side (a loaded 2-core machine only
makes ticks late, never early) and tight on the fast side, where today's
failure mode lives: every eligible process ticking on its own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from epochgc.config import Config, EpochConfig, LeaseConfig, MetricsConfig, ReconcilerConfig
from epochgc.events import EventChannel
from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import ScheduleSettings
from epochgc.gc.daemon.scheduler import DaemonSettings, GcDaemon
from epochgc.leases.role_leases import LeaseDocument, LeaseLost, LeaseManager, encode_lease
from epochgc.leases.timing import LeasePolicy
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import lease_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.ticker import TICKER_LEASE, EpochTicker
from epochgc.wiring.reconciler_process import run_reconciler
from tests.support.cli import run_cli
from tests.support.config_files import write_server_config
from tests.support.waiting import wait_for

ROOT = "epochgc"
INTERVAL = 0.3


def test_three_reconciler_nodes_tick_about_once_per_interval_not_three_times(
    store: S3ObjectStore,
) -> None:
    config = Config(
        epoch=EpochConfig(interval_seconds=INTERVAL, cache_ttl_seconds=0.1),
        lease=LeaseConfig(ttl_seconds=3.0, renew_interval_seconds=0.2, skew_margin_seconds=0.5),
        reconciler=ReconcilerConfig(round_interval_seconds=0.5),
        metrics=MetricsConfig(listen=""),
    )
    controller = Controller(store, ROOT)
    before = controller.current_epoch()

    async def three_nodes() -> None:
        await asyncio.gather(
            *(
                run_reconciler(config, store, node_id=f"node-{i}", duration_seconds=4.0)
                for i in range(3)
            )
        )

    started = time.monotonic()
    asyncio.run(three_nodes())
    elapsed = time.monotonic() - started
    ticks = controller.current_epoch() - before  # no topics: every entry is a tick
    # One ticker: at most one tick per interval over the run (+2 for the
    # edges). Three independent tickers give about three times that.
    assert ticks <= elapsed / INTERVAL + 2, f"{ticks} ticks in {elapsed:.1f}s"
    assert ticks >= 3, f"the epoch hardly moved: {ticks} ticks in {elapsed:.1f}s"


# --- ticker drivers in threads, as separate processes would run them ---------------

POLICY = LeasePolicy(ttl_seconds=5.0, renew_interval_seconds=0.2, skew_margin_seconds=0.5)


Ticks = list[tuple[float, float, str]]
"""Every tick appended: (started, ended, by whom), on the monotonic clock."""


class Eligible:
    """One ticker-eligible "process": its own lease manager, controller and
    ticker. Every tick it appends is recorded as (started, ended, name) on
    the shared monotonic clock of the test."""

    def __init__(self, store: S3ObjectStore, name: str, ticks: Ticks):
        self.name = name
        self.lost_at: float | None = None
        events = EventChannel()
        events.subscribe(LeaseLost, self._on_lost)
        self.leases = LeaseManager(store, ROOT, name, policy=POLICY, events=events)
        controller = Controller(store, ROOT)
        lock = threading.Lock()

        def tick(still_allowed: Callable[[], None]) -> int:
            started = time.monotonic()
            epoch = controller.tick(still_allowed)
            with lock:
                ticks.append((started, time.monotonic(), name))
            return epoch

        self.ticker = EpochTicker(
            self.leases,
            tick,
            interval_seconds=INTERVAL,
            poll_seconds=POLICY.renew_interval_seconds,
        )

    def _on_lost(self, _event: LeaseLost) -> None:
        self.lost_at = time.monotonic()

    def start(self) -> None:
        self.leases.start()
        self.ticker.start()

    def stop(self) -> None:
        self.ticker.stop(release=True)
        self.leases.stop(release=True)


Cluster = Callable[[int], tuple[list[Eligible], Ticks]]
"""Starts ``n`` eligible processes sharing one ``Ticks``."""


@pytest.fixture
def cluster(store: S3ObjectStore) -> Iterator[Cluster]:
    started: list[Eligible] = []

    def start(n: int) -> tuple[list[Eligible], Ticks]:
        ticks: Ticks = []
        procs = [Eligible(store, f"proc-{i}", ticks) for i in range(n)]
        for proc in procs:
            proc.start()
            started.append(proc)
        return procs, ticks

    yield start
    for proc in started:
        proc.stop()


def assert_ticks_an_interval_apart(ticks: Ticks) -> None:
    """Each tick starts at least one interval after the previous one ended,
    whoever appended them: one epoch per interval, across hand-overs too."""
    ordered = sorted(ticks)
    for (_s0, ended, a), (started, _e1, b) in itertools.pairwise(ordered):
        assert started - ended >= INTERVAL - 1e-6, f"{a} then {b} {started - ended:.3f}s apart"


def holder(procs: list[Eligible]) -> Eligible | None:
    held = [p for p in procs if p.ticker.held]
    assert len(held) <= 1, f"two holders: {[p.name for p in held]}"
    return held[0] if held else None


def ticking_holder(procs: list[Eligible]) -> Eligible:
    """Wait until one of ``procs`` holds the role and has ticked twice: that one."""
    wait_for(lambda: (h := holder(procs)) is not None and h.ticker.ticks >= 2, what="ticks")
    first = holder(procs)
    assert first is not None
    return first


def test_three_eligible_processes_give_one_tick_per_interval(
    store: S3ObjectStore,
    cluster: Cluster,
) -> None:
    before = Controller(store, ROOT).current_epoch()
    started = time.monotonic()
    procs, ticks = cluster(3)
    time.sleep(3.0)
    for proc in procs:
        proc.stop()
    elapsed = time.monotonic() - started
    appended = Controller(store, ROOT).current_epoch() - before
    assert appended == len(ticks) == sum(p.ticker.ticks for p in procs)
    assert appended <= elapsed / INTERVAL + 1, f"{appended} ticks in {elapsed:.1f}s"
    assert appended >= 3, f"the epoch hardly moved: {appended} ticks in {elapsed:.1f}s"
    assert_ticks_an_interval_apart(ticks)
    lease = LeaseManager.read_holder(store, ROOT, TICKER_LEASE)
    assert lease is not None and lease.released, "stop() released the role"


def test_a_stopping_holder_hands_the_role_over_at_once(
    store: S3ObjectStore,
    cluster: Cluster,
) -> None:
    procs, ticks = cluster(3)
    first = ticking_holder(procs)
    stopped_at = time.monotonic()
    first.stop()
    rest = [p for p in procs if p is not first]
    wait_for(lambda: holder(rest) is not None, timeout=10, what="a new holder")
    # Released, not expired: a takeover after expiry needs a whole TTL.
    assert time.monotonic() - stopped_at < POLICY.ttl_seconds - 1.0
    second = holder(rest)
    assert second is not None
    wait_for(lambda: second.ticker.ticks >= 2, what="ticks from the new holder")
    assert first.ticker.ticks >= 2 and not first.ticker.held
    assert_ticks_an_interval_apart(ticks)


def test_a_holder_that_loses_the_lease_stops_ticking(
    store: S3ObjectStore,
    cluster: Cluster,
) -> None:
    procs, ticks = cluster(3)
    first = ticking_holder(procs)
    # Another process takes the lease, as it would once the holder had been
    # frozen past the TTL: the lease object now names it.
    thief = Eligible(store, "thief", ticks)
    current = LeaseManager.read_holder(store, ROOT, TICKER_LEASE)
    assert current is not None
    stolen = LeaseDocument(thief.leases.holder, current.term + 1, datetime.now(UTC))
    store.put(lease_key(ROOT, TICKER_LEASE), encode_lease(stolen))
    thief.start()
    try:
        wait_for(lambda: first.lost_at is not None, what="the holder noticing its loss")
        wait_for(lambda: thief.ticker.ticks >= 3, what="ticks from the new holder")
    finally:
        thief.stop()
    assert not first.ticker.held
    assert first.lost_at is not None
    mine = [started for started, _ended, name in ticks if name == first.name]
    assert len(mine) == first.ticker.ticks >= 2
    # The grant is checked right before each append, so no tick starts after
    # the loss, but for one whose check raced with it.
    assert max(mine) < first.lost_at + 0.25, "ticked after losing the lease"


def test_the_daemon_ticks_while_it_holds_the_role_and_says_so(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    settings = DaemonSettings(
        node_id="gc-ticker",
        collect=CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0),
        schedule=ScheduleSettings(
            interval=timedelta(seconds=5), epoch_interval=timedelta(seconds=INTERVAL)
        ),
        lease=POLICY,
        ticker=True,
        metrics_listen="",
    )
    daemon = GcDaemon(store, RequestStats(), ROOT, settings)
    registry = daemon.registry
    daemon.start()
    try:
        wait_for(
            lambda: (registry.get_sample_value("epochgc_ticker_ticks_total") or 0) >= 2,
            what="the daemon's ticks",
        )
        assert registry.get_sample_value("epochgc_ticker_leader") == 1
        assert registry.get_sample_value("epochgc_ticker_eligible") == 1
        config = write_server_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)
        shown = run_cli("gc", "status", "--config", str(config), "--json")
        assert shown.returncode == 0, shown.stderr
        status = json.loads(shown.stdout)
        assert status["ticker"]["holder"] == daemon.leases.holder
        assert status["ticker"]["valid"] is True
    finally:
        daemon.stop()
    assert registry.get_sample_value("epochgc_ticker_leader") == 0
    lease = LeaseManager.read_holder(store, ROOT, TICKER_LEASE)
    assert lease is not None and lease.released
    assert Controller(store, ROOT).current_epoch() == daemon.ticker.ticks  # type: ignore[union-attr]
