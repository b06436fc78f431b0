"""Issue 26, item 2: no time written by one process can stop another.

A collector whose clock runs 30 days ahead writes the shard knowledge with
times in the future; a correctly clocked collector that comes after must
still delete every eligible key within ``gc.max_lag_seconds`` and must not
write the poisoned times back. A collector whose clock runs days behind
must not delete anything sooner: deletion rests on ``M`` and the object's
own store timestamp only.

Everything runs against the embedded S3 with injected clocks: the
collector's ``now`` is the only thing skewed, as on a real host.
"""

from __future__ import annotations

import json
import logging
import math
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.collector import Collector, RoundOutcome
from epochgc.gc.daemon.scheduler import GcDaemon
from epochgc.gc.future_times import FutureTimeLog
from epochgc.gc.listing.schedule import ListingPolicy
from epochgc.gc.presence import PresenceDocument, read_presences, write_presence
from epochgc.storage.keys import encode_l0_key, gc_shard_state_key, parse_l0_key, report_key
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    encode_report,
    publish_report,
)
from tests.integration.test_daemon import settings as daemon_settings
from tests.support.events import found_into
from tests.support.moto_seed import seed_objects

ROOT = "epochgc"
SHARDS = 8
MAX_LAG = 3600.0
AHEAD = timedelta(days=30)


def settings(min_object_age: timedelta = timedelta(0)) -> CollectSettings:
    return CollectSettings(
        min_object_age=min_object_age,
        max_delete_fraction=1.0,
        listing=ListingPolicy(max_lag_seconds=MAX_LAG),
    )


def report(store: S3ObjectStore, safe_epoch: int, at: datetime) -> None:
    publish_report(
        store,
        ROOT,
        NodeReport(
            "node-1",
            at,
            (PartitionReport("orders", 3, 0, 1, safe_epoch, 0, safe_epoch + 1, safe_epoch + 1),),
        ),
    )


def world(store: S3ObjectStore, bucket: str, now: datetime) -> list[str]:
    """M = 6 (topic at revision 3, controller at 30, its partition reports
    6); in each of ``SHARDS`` shards one L0 object at epoch 10 (eligible once
    M reaches 10) and one at epoch 40 (above any M here). Returns the epoch
    10 keys."""
    controller = Controller(store, ROOT)
    controller.tick()
    controller.tick()
    controller.create_topic("orders", 1)
    controller.advance_to(30)
    report(store, 6, now)
    eligible = [encode_l0_key(ROOT, s, 10, str(uuid.uuid4())) for s in range(SHARDS)]
    above = [encode_l0_key(ROOT, s, 40, str(uuid.uuid4())) for s in range(SHARDS)]
    seed_objects(bucket, eligible + above)
    return eligible


def l0_keys(store: S3ObjectStore) -> set[str]:
    return {o.key for o in store.list_objects(f"{ROOT}/l0/")}


def stored_times(store: S3ObjectStore) -> list[datetime]:
    """Every time in the shard knowledge document."""
    doc = json.loads(store.get(gc_shard_state_key(ROOT)).body)
    texts = [doc.get("full_sweep_at"), doc.get("discovered_at")]
    for facts in doc["shards"].values():
        texts += [facts.get("listed_at"), facts.get("quiet_at")]
    return [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in texts if t is not None]


@pytest.mark.parametrize("stepped_back", [False, True], ids=["other-host", "same-daemon"])
def test_a_collector_30_days_ahead_does_not_stop_a_correct_one(
    store: S3ObjectStore, bucket: str, stepped_back: bool
) -> None:
    """other-host: a `gc collect` on a host 30 days ahead, then a correctly
    clocked daemon that reads the document. same-daemon: the daemon's own
    clock ran 30 days ahead for one round and was then set right; it keeps
    its knowledge in memory and never reads the document again."""
    t0 = datetime.now(UTC)
    eligible = world(store, bucket, t0)
    stats = RequestStats()
    clock = [t0 + AHEAD]
    counted: list[str] = []
    collector = Collector(
        store,
        stats,
        ROOT,
        settings(),
        now=lambda: clock[0],
        writer="gc-right",
        future_log=FutureTimeLog(events=found_into(counted)),
    )

    if stepped_back:
        assert collector.run_round().outcome is RoundOutcome.IDLE
    else:
        skewed = collect_once(store, stats, ROOT, settings(), now=t0 + AHEAD)
        assert skewed.summary.deleted == 0
    assert max(stored_times(store)) >= t0 + AHEAD - timedelta(minutes=1), "the poison is there"

    # M reaches 10 at t0 + 1 min: from then on, 8 keys are eligible.
    eligible_at = t0 + timedelta(minutes=1)
    report(store, 10, eligible_at)

    # A correctly clocked daemon's collector runs rounds over simulated
    # hours (other-host: its first round reads the knowledge from the bucket).
    clock[0] = t0 + timedelta(minutes=2)
    gone_at: datetime | None = None
    while clock[0] < t0 + timedelta(hours=168):
        outcome = collector.run_round()
        assert outcome.outcome in (RoundOutcome.COLLECTED, RoundOutcome.IDLE), outcome.error
        if not set(eligible) & l0_keys(store):
            gone_at = clock[0]
            break
        clock[0] += timedelta(minutes=5)
    left = sorted(set(eligible) & l0_keys(store))
    assert gone_at is not None, f"{len(left)} eligible keys kept after 168 simulated hours"
    assert gone_at - eligible_at <= timedelta(seconds=MAX_LAG), gone_at - eligible_at
    above = [k for k in l0_keys(store) if parse_l0_key(k, ROOT).epoch == 40]  # type: ignore[union-attr]
    assert len(above) == SHARDS, "nothing above M was deleted"
    # The correct collector rewrote the document from its own listings: no
    # time it holds is ahead of the correct clock (nothing read was written back).
    assert max(stored_times(store)) <= clock[0], max(stored_times(store))
    assert counted == ["shard_knowledge"], "counted when read, and read only once"


def test_a_collector_days_behind_deletes_nothing_sooner(store: S3ObjectStore, bucket: str) -> None:
    """Deletion rests on M and the object's own store timestamp: by a clock
    30 days behind, every object was stored in the future, so it is too
    young whatever ``min_object_age`` (the safe direction) and the behind
    collector deletes nothing. The times it writes are in the past, which
    only makes a correct collector's work due sooner: that one deletes
    exactly the keys at or below M."""
    t0 = datetime.now(UTC)
    eligible = world(store, bucket, t0)
    report(store, 10, t0)
    behind = t0 - timedelta(days=30)
    stats = RequestStats()

    for age in (timedelta(hours=1), timedelta(0)):
        run = collect_once(store, stats, ROOT, settings(age), now=behind, all_shards=True)
        assert run.summary.deleted == 0 and run.summary.skipped["too_young"] == SHARDS
        assert len(l0_keys(store)) == 2 * SHARDS
    assert max(stored_times(store)) <= behind + timedelta(minutes=1)

    right = collect_once(store, stats, ROOT, settings(), now=t0 + timedelta(minutes=1))
    assert right.summary.deleted == SHARDS
    left = l0_keys(store)
    assert not set(eligible) & left and len(left) == SHARDS
    assert all(parse_l0_key(k, ROOT).epoch == 40 for k in left)  # type: ignore[union-attr]


def future_count(daemon: GcDaemon, document: str) -> float | None:
    return daemon.registry.get_sample_value(
        "epochgc_collector_future_stored_times_total", {"document": document}
    )


def test_the_daemon_reads_reports_and_presence_from_the_future_as_stale(
    store: S3ObjectStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A node 30 days ahead: its report would look fresh for 30 days (the
    stale-report alert silent while it is dead); a crashed daemon 30 days
    ahead: its presence document would outlive the grace by 30 days."""
    ahead = datetime.now(UTC) + AHEAD
    store.put(report_key(ROOT, "node-fast"), encode_report(NodeReport("node-fast", ahead, ())))
    write_presence(
        store,
        ROOT,
        PresenceDocument("gc-fast", "gc-fast/01", "standby", "running", ahead, ahead, 60.0),
    )
    daemon = GcDaemon(store, RequestStats(), ROOT, daemon_settings("gc-a"))
    with caplog.at_level(logging.WARNING, logger="epochgc.gc.clock"):
        daemon.jobs.reports()
        daemon.jobs.reports()
        daemon.jobs.presence_tidy()
    assert daemon.jobs.reports.ages()["node-fast"] == math.inf, "unknown age: stale"
    assert future_count(daemon, "report") == 2, "counted at every reading"
    assert future_count(daemon, "presence") == 1
    assert read_presences(store, ROOT)[0] == [], "a crashed daemon's document is tidied"
    lines = [r.getMessage() for r in caplog.records if r.name == "epochgc.gc.clock"]
    assert len(lines) == 2, "logged once per writer"
    assert "node-fast" in lines[0] and "gc-fast/01" in lines[1]
