"""A pause stops every deletion the collector role makes (issue 26, item 3):
the L0 sweep, the janitor, the controller log's truncation and the
leader's tidying (reports of gone nodes, expired run summaries, presence
documents of gone daemons), in the daemon and in ``gc collect``; ``gc
status`` lists what it holds, and a resume lets the held work happen."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from epochgc.gc.collection_round import CollectSettings, collect_once
from epochgc.gc.control import DeletingJob, pause, read_status, resume
from epochgc.gc.daemon.maintenance import MaintenanceSettings
from epochgc.gc.daemon.scheduler import GcDaemon
from epochgc.gc.janitor import Janitor
from epochgc.gc.presence import PresenceDocument, write_presence
from epochgc.gc.run_report import new_run_id
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import (
    controller_log_prefix,
    encode_l0_key,
    gc_daemon_key,
    gc_run_summary_key,
    report_key,
    topic_meta_prefix,
)
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.controller import CompactionPolicy, Controller
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    publish_report,
)
from tests.integration.test_daemon import settings as daemon_settings
from tests.support.cli import run_cli
from tests.support.config_files import write_server_config
from tests.support.deletes import DeleteRecorder
from tests.support.moto_seed import seed_objects
from tests.support.pausing import PauseAfterFirstControlRead
from tests.support.waiting import wait_for

ROOT = "epochgc"
GONE_NODE = "node-gone"
GONE_DAEMON = "gc-gone"


@dataclass(frozen=True)
class World:
    """Something for every deleting job of the collector role to delete."""

    l0: list[str]
    dead_meta_prefix: str
    gone_report: str
    old_run: str
    gone_presence: str
    log_entries: int


def build_world(store: S3ObjectStore, bucket: str) -> World:
    controller = Controller(store, ROOT)
    orders = controller.create_topic("orders", 1)
    pid = orders.partition_id(0)
    # A node that reported on orders@rev and went: its report covers a
    # partition that is no longer live, so tidying may delete it.
    entry = PartitionReport(pid.topic, pid.revision, pid.partition, 1, 3, 0, 4, 3)
    publish_report(store, ROOT, NodeReport(GONE_NODE, datetime.now(UTC), (entry,)))
    controller.delete_topic("orders")  # the janitor's work: orders@rev's metadata
    controller.advance_to(30)  # compaction's work: ~30 entries above no snapshot
    l0 = [encode_l0_key(ROOT, s, e, str(uuid.uuid4())) for s in range(2) for e in (1, 2, 3)]
    seed_objects(bucket, l0)
    # Expired under the daemon's 1 s retention (which reads the store's
    # timestamp of the run, not the time in its id) by the time it tidies.
    old_run = new_run_id(datetime.now(UTC) - timedelta(days=40))
    store.put(gc_run_summary_key(ROOT, old_run), b"{}")
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    write_presence(
        store,
        ROOT,
        PresenceDocument(
            GONE_DAEMON, f"{GONE_DAEMON}/1", "leader", "running", long_ago, long_ago, 1
        ),
    )
    dead_meta = topic_meta_prefix(ROOT, "orders", orders.revision)
    world = World(
        l0=l0,
        dead_meta_prefix=dead_meta,
        gone_report=report_key(ROOT, GONE_NODE),
        old_run=gc_run_summary_key(ROOT, old_run),
        gone_presence=gc_daemon_key(ROOT, GONE_DAEMON),
        log_entries=len(list(store.list_objects(controller_log_prefix(ROOT)))),
    )
    assert list(store.list_objects(dead_meta)), "orders@rev left metadata for the janitor"
    return world


def left(store: S3ObjectStore, world: World) -> dict[str, int]:
    """How much of each job's work is still in the bucket."""

    def count(prefix: str) -> int:
        return len(list(store.list_objects(prefix)))

    return {
        "l0": count(f"{ROOT}/l0/"),
        "janitor": count(world.dead_meta_prefix),
        "controller_log": len(
            [o for o in store.list_objects(controller_log_prefix(ROOT)) if "snapshot" not in o.key]
        ),
        "report": count(world.gone_report),
        "run": count(world.old_run),
        "presence": count(world.gone_presence),
    }


def test_a_paused_leader_deletes_nothing_lists_what_it_holds_and_catches_up_on_resume(
    tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    world = build_world(store, bucket)
    before = left(store, world)
    assert before == {
        "l0": 6,
        "janitor": before["janitor"],
        "controller_log": world.log_entries,
        "report": 1,
        "run": 1,
        "presence": 1,
    }
    pause(store, ROOT, by="alice", reason="look first", now=datetime.now(UTC))
    recorder = DeleteRecorder(store)
    daemon = GcDaemon(
        recorder,  # type: ignore[arg-type]
        RequestStats(),
        ROOT,
        daemon_settings(
            "gc-a",
            maintenance_interval_seconds=0.3,
            maintenance=MaintenanceSettings(
                dead_after_seconds=0.0, runs_retention=timedelta(seconds=1)
            ),
            compaction=CompactionPolicy(interval_seconds=0.3, min_entries=5),
        ),
    )
    config = write_server_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket)
    daemon.start()
    try:
        wait_for(lambda: daemon.is_leader and daemon.rounds >= 3, what="rounds while paused")
        # Several compaction and maintenance intervals (0.3 s each) go by.
        wait_for(
            lambda: {h.job for h in daemon.held_jobs()} == set(DeletingJob),
            what="every deleting job coming due and being held",
        )
        assert recorder.deleted == [], "a paused collector sent a delete"
        assert left(store, world) == before

        status = json.loads(run_cli("gc", "status", "--json", "--config", str(config)).stdout)
        held = {row["job"]: row for row in status["held_jobs"]}
        assert set(held) == {job.value for job in DeletingJob}
        assert all(row["due_since"] is not None for row in held.values()), held
        text = run_cli("gc", "status", "--config", str(config)).stdout
        held_line = next(line for line in text.splitlines() if line.startswith("held:"))
        for job in DeletingJob:
            assert job.what in held_line, (job, held_line)

        resume(store, ROOT, by="alice", now=datetime.now(UTC))
        wait_for(
            lambda: (
                left(store, world)
                == {
                    "l0": 0,
                    "janitor": 0,
                    "controller_log": 1,
                    "report": 0,
                    "run": 0,
                    "presence": 0,
                }
            ),
            what="the held work done after the resume",
        )
        wait_for(lambda: daemon.held_jobs() == (), what="nothing held any more")
        published = read_status(store, ROOT)
        wait_for(
            lambda: (s := read_status(store, ROOT)) is not None and s.held == (),
            what="the published status holding nothing",
        )
        assert published is not None
    finally:
        daemon.stop()


@pytest.mark.parametrize("l0_to_delete", [True, False])
def test_a_pause_after_the_sweep_began_holds_the_rounds_janitor(
    store: S3ObjectStore, bucket: str, l0_to_delete: bool
) -> None:
    """The round read the pause before its sweep; an operator paused during
    the sweep: the janitor pass that follows must not run (with L0 to
    delete, the sweep's first DeleteObjects already finds the pause)."""
    world = build_world(store, bucket)
    if not l0_to_delete:
        store.delete_many(world.l0)
    pausing = PauseAfterFirstControlRead(store, ROOT, by="bob", reason="mid-round")
    outcome = collect_once(
        pausing,  # type: ignore[arg-type]
        RequestStats(),
        ROOT,
        CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0),
        janitor=Janitor(pausing, ROOT),  # type: ignore[arg-type]
    )
    assert left(store, world)["janitor"] > 0, "the janitor deleted after the pause"
    assert left(store, world)["l0"] == (6 if l0_to_delete else 0), "no batch sent after the pause"
    assert not outcome.summary.janitor.complete, "not done: the next round runs it"
    assert outcome.paused == "paused by bob: mid-round"
    assert not outcome.summary.success
    assert outcome.summary.cause == "paused by bob: mid-round (mid-run)"


def test_gc_collect_while_paused_deletes_nothing_of_any_kind(
    tmp_path: Path, s3_server: EmbeddedS3, store: S3ObjectStore, bucket: str
) -> None:
    world = build_world(store, bucket)
    before = left(store, world)
    config = write_server_config(tmp_path / "gc.toml", s3_server.endpoint_url, bucket)
    pause(store, ROOT, by="carol", reason="incident", now=datetime.now(UTC))
    for flags in ((), ("--force",), ("--all-shards",)):
        done = run_cli("gc", "collect", *flags, "--config", str(config))
        assert done.returncode == 1, (flags, done.stdout, done.stderr)
        assert done.stderr.strip().endswith("paused by carol: incident"), done.stderr
    assert left(store, world) == before
