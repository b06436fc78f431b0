"""The ``epochgc`` command line.

Each sub-command loads and validates the configuration before doing any
work (a bad value exits 2 with file, key and reason), sets up logging once,
and exits non-zero on failure. Nothing imports this module.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import getpass
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NoReturn

from epochgc.cli.liveness import cmd_gc_explain, cmd_partition_skip
from epochgc.config import SPARK_LOG_LEVELS, Config, load_config, log_level_of
from epochgc.errors import ConfigError, EpochGCError, StoreCapabilityError
from epochgc.extras import SPARK, require
from epochgc.gc.collection_round import collect_once
from epochgc.gc.control import (
    CollectorPausedError,
    ControlDocument,
    DeletingJob,
    pause,
    read_control,
    read_status,
    request_reset,
    resume,
)
from epochgc.gc.daemon.presence import read_presences
from epochgc.gc.daemon.scheduler import GC_LEASE
from epochgc.gc.pause import PauseGuard
from epochgc.gc.run_report import RunSummary, encode_summary, recent_runs, run_figures
from epochgc.gc.status import StatusInputs, epoch_info_view, read_epoch_info, status_view
from epochgc.leases.role_leases import LeaseManager
from epochgc.logging_setup import setup_logging
from epochgc.metrics.push import COLLECT_JOB, push_run
from epochgc.progress import ProgressLog
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.probe import format_probe_table, run_probes
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.known_nodes import forget_node, list_nodes
from epochgc.watermarks.layout import LAYOUT
from epochgc.watermarks.migrate import migrate_layout
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.watermarks.ticker import TICKER_LEASE
from epochgc.wiring.daemon_process import run_daemon
from epochgc.wiring.reconciler_process import produce_and_verify, run_reconciler
from epochgc.wiring.settings import collect_settings_of, prices_of
from epochgc.wiring.store import open_store
from epochgc.wording import counted

log = logging.getLogger("epochgc.cli")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2


def _cmd_check_store(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, check_layout=False, writes=False) as handle:
        results = run_probes(
            handle.store,
            config.layout.root,
            detect_if_match_form=config.store.if_match_form == "auto",
        )
    if args.json:
        print(
            json.dumps(
                {
                    "bucket": config.store.bucket,
                    "ok": all(r.passed for r in results),
                    "if_match_form": handle.store.if_match_form,
                    "probes": [
                        {"name": r.name, "passed": r.passed, "detail": r.detail} for r in results
                    ],
                },
                indent=2,
            )
        )
    else:
        print(format_probe_table(results, config.store.bucket))
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


def _cmd_migrate(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, check_layout=False) as handle:
        report = migrate_layout(handle.store, config.layout.root)
    if report.already_current:
        human = f"root {config.layout.root!r} is already in layout {LAYOUT}: nothing to do"
    else:
        abandoned = "".join(f"\n  not migrated: {a}" for a in report.partitions_abandoned)
        human = (
            f"migrated {counted(len(report.partitions_migrated), 'partition')} to layout {LAYOUT}: "
            f"{report.objects_copied} objects copied, {report.objects_deleted} layout-1 "
            f"objects and {report.leases_deleted} partition leases deleted{abandoned}"
        )
    _print(dataclasses.asdict(report), args, human)
    return EXIT_OK


def _cmd_config_show(config: Config, args: argparse.Namespace) -> int:
    described = config.describe()
    # TOML-like for people (what they would write in a file), JSON for scripts.
    lines: list[str] = []
    for section, values in described.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
        lines.append("")
    _print(described, args, "\n".join(lines).rstrip())
    return EXIT_OK


def _exit_now() -> NoReturn:
    """Leave with exit status 1 at once: a reconciler node whose loop
    stopped has said why (one line) and let go of its partitions; the hung
    loop's threads may never end, and a normal exit would wait for them.
    Its supervisor restarts it."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_FAILED)


def _cmd_reconciler(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        node = asyncio.run(
            run_reconciler(
                config,
                handle.store,
                stats=handle.stats,
                node_id=args.node_id,
                duration_seconds=args.duration,
                exit_process=_exit_now,
            )
        )
    print(
        f"reconciler {node.node_id}: {node.stats.rounds} rounds, "
        f"{node.stats.records_reconciled} records reconciled, {node.stats.errors} errors"
    )
    return EXIT_OK


def _cmd_produce(config: Config, args: argparse.Namespace) -> int:
    records = [r.encode() for r in args.record] or [
        f"record-{i}".encode() for i in range(args.count)
    ]
    with open_store(config) as handle:
        if args.create_partitions is not None:
            controller = Controller(handle.store, config.layout.root)
            if args.topic not in controller.snapshot().topics:
                controller.create_topic(args.topic, args.create_partitions)
        offsets, ok = asyncio.run(
            produce_and_verify(config, handle.store, args.topic, args.partition, records)
        )
    _print(
        {"topic": args.topic, "partition": args.partition, "offsets": offsets, "verified": ok},
        args,
        f"{len(offsets)} records acknowledged at offsets {offsets[0]}..{offsets[-1]}; "
        f"read back {'identically' if ok else 'WITH DIFFERENCES'}",
    )
    return EXIT_OK if ok else EXIT_FAILED


def _cmd_gc_collect(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        outcome = collect_once(
            handle.store,
            handle.stats,
            config.layout.root,
            collect_settings_of(config),
            dry_run=args.dry_run,
            force=args.force,
            all_shards=args.all_shards,
            writer=f"gc-collect@{socket.gethostname()}",
        )
    s = outcome.summary
    if outcome.paused is not None:
        # Paused after the round's first read: its deleting pass stopped.
        raise CollectorPausedError(
            f"{outcome.paused} (mid-run; run {s.run_id}, deleted {s.deleted}, "
            f"summary {outcome.summary_key})"
        )
    if config.metrics.pushgateway:
        seconds = (s.finished_at - s.started_at).total_seconds()
        push_run(
            config.metrics.pushgateway,
            s.engine,
            run_figures(s, seconds),
            s.skipped,
            job=COLLECT_JOB,
        )
    return _print_run(
        s,
        args,
        {"summary_key": outcome.summary_key, "plan_key": outcome.plan_key},
        plan=outcome.plan_key,
        stopped=outcome.stopped_by_guard,
    )


def _print_run(
    s: RunSummary,
    args: argparse.Namespace,
    extra: dict[str, object],
    *,
    plan: str | None = None,
    stopped: str | None = None,
    details: str = "",
) -> int:
    """A run summary as a table line (or JSON); exit 0 only if it succeeded."""
    human = (
        f"run {s.run_id} ({s.engine}{', dry run' if s.dry_run else ''}{details}): "
        f"M={s.safe_epoch} (controller offset {s.controller_offset}); listed {s.listed}, "
        f"eligible {s.eligible}, deleted {s.deleted} ({s.bytes_deleted} bytes), "
        f"errors {s.errors}; skipped {dict(s.skipped)}"
    )
    if plan:
        human += f"\nplan: {plan}"
    if stopped:
        human += f"\nSTOPPED: {stopped}"
    _print({**json.loads(encode_summary(s)), **extra, "stopped": stopped}, args, human)
    return EXIT_OK if s.success else EXIT_FAILED


def _cmd_gc_epoch_info(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, writes=False) as handle:
        info = read_epoch_info(handle.store, config.layout.root, pinning=args.top)
    if info.safe is None:
        print(f"safety_blocked: untrusted M inputs: {info.untrusted}", file=sys.stderr)
        return EXIT_FAILED
    data, lines = epoch_info_view(info.cluster_epoch, info.safe)
    _print(data, args, "\n".join(lines))
    return EXIT_OK


def _cmd_gc_runs(config: Config, args: argparse.Namespace) -> int:
    prices = prices_of(config)
    with open_store(config, writes=False) as handle:
        rows = recent_runs(handle.store, config.layout.root, prices, args.limit)
    lines = [
        f"{r['run_id']:28} {r.get('engine', '?'):15} {r.get('safe_epoch', '?'):>8} "
        f"{r.get('deleted', '?'):>9} {r.get('errors', '?'):>6} "
        f"{_dollars(r.get('cost_usd')):>10} {_dollars(r.get('usd_per_gb')):>10}  "
        f"{'ok' if r.get('success') else 'FAILED'}{' dry-run' if r.get('dry_run') else ''}"
        f"{': ' + str(r['cause']) if r.get('cause') else ''}"
        for r in rows
    ]
    header = (
        f"{'run':28} {'engine':15} {'M':>8} {'deleted':>9} {'errors':>6} "
        f"{'cost $':>10} {'$/GB':>10}  outcome"
    )
    _print(rows, args, "\n".join([header, *lines]) if lines else "no runs yet")
    return EXIT_OK


def _dollars(value: object) -> str:
    """A modelled cost for a table: ``-`` when there is none."""
    return f"{value:.6f}" if isinstance(value, float | int) else "-"


def _operator() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def _control_data(control: ControlDocument) -> dict[str, object]:
    return {
        "paused": control.paused,
        "reason": control.reason,
        "updated_by": control.updated_by,
        "updated_at": control.updated_at if control.updated_by else None,
        "reset_generation": control.reset_generation,
    }


def _cmd_gc_status(config: Config, args: argparse.Namespace) -> int:
    root = config.layout.root
    with open_store(config, writes=False) as handle:
        control, _etag = read_control(handle.store, root)
        status = read_status(handle.store, root)
        lease = LeaseManager.read_holder(handle.store, root, GC_LEASE)
        ticker = LeaseManager.read_holder(handle.store, root, TICKER_LEASE)
        # A LIST: a store that cannot be read fails here (exit 1), it never
        # reads as "nothing written yet".
        daemons, unreadable = read_presences(handle.store, root)
    data, lines = status_view(
        StatusInputs(control, status, lease, ticker, daemons, unreadable), datetime.now(UTC)
    )
    _print(data, args, "\n".join(lines))
    return EXIT_OK


def _cmd_gc_pause(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        doc = pause(
            handle.store,
            config.layout.root,
            by=_operator(),
            reason=args.reason,
            now=datetime.now(UTC),
        )
    _print(
        _control_data(doc),
        args,
        "collector paused: running daemons stop after their batches in flight "
        "(within [daemon] control_poll_seconds), `gc collect` and `gc spark` refuse to "
        "delete (dry runs still run); held: the L0 sweep, the janitor, the controller "
        "log's truncation and tidying (`gc status` lists them); `epochgc gc resume` undoes it",
    )
    return EXIT_OK


def _cmd_gc_resume(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        doc = resume(handle.store, config.layout.root, by=_operator(), now=datetime.now(UTC))
    _print(_control_data(doc), args, "collector resumed")
    return EXIT_OK


def _cmd_gc_reset(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        doc = request_reset(handle.store, config.layout.root, by=_operator(), now=datetime.now(UTC))
    _print(
        _control_data(doc),
        args,
        f"reset requested (generation {doc.reset_generation}): a safety_blocked collector "
        "retries computing M at its next round",
    )
    return EXIT_OK


def _cmd_daemon(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        daemon = run_daemon(
            config,
            handle.store,
            handle.stats,
            node_id=args.node_id,
            duration_seconds=args.duration,
        )
    print(f"gc daemon stopped after {daemon.rounds} rounds ({daemon.collector.state.value})")
    return EXIT_OK


def _cmd_demo(config: Config, args: argparse.Namespace) -> int:
    # Imported here: only this command needs the whole stack at once.
    from epochgc.demo import run_demo, summary_lines  # noqa: PLC0415

    if not config.store.embedded:
        print(
            "epochgc: the demo runs on the embedded S3 only: use --config config/local.toml "
            "(or set EPOCHGC_STORE__EMBEDDED=true)",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if config.gc.min_object_age_seconds > args.duration / 4:
        print(
            f"epochgc: [gc] min_object_age_seconds={config.gc.min_object_age_seconds:g} is too "
            f"long for a {args.duration:g}s demo (nothing would age in): use config/local.toml",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if args.log_level is None:
        setup_logging("WARNING")  # the live table is the output; warnings still show
    with open_store(config) as handle:
        result = asyncio.run(
            run_demo(config, handle, duration_seconds=args.duration, seed=args.seed)
        )
    print("\n".join(summary_lines(result)))
    return EXIT_OK if result.ok else EXIT_FAILED


def _cmd_gc_spark(config: Config, args: argparse.Namespace) -> int:
    # Imported here: only these commands need Spark (an extra).
    require("pyspark", SPARK, "epochgc gc spark")
    require("pyarrow", SPARK, "epochgc gc spark")
    from epochgc.gc.spark.conf import merged_conf, parse_conf_args  # noqa: PLC0415
    from epochgc.gc.spark.job import SparkRunOptions, run_spark_gc  # noqa: PLC0415
    from epochgc.gc.spark.session import build_spark_session, package_to_ship  # noqa: PLC0415
    from epochgc.wiring.settings import spark_gc_settings_of  # noqa: PLC0415

    spark_conf = merged_conf(config.spark.conf, parse_conf_args(args.conf))
    master = args.master or config.spark.master
    options = SparkRunOptions(
        mode=args.mode,
        dry_run=args.dry_run,
        force=args.force,
        max_epoch=args.max_epoch,
        allow_above_m=args.allow_max_epoch_above_m,
        listing_tasks=config.spark.listing_tasks,
    )
    with open_store(config) as handle:
        if not args.dry_run:
            # Refuse before starting Spark (the driver checks again itself).
            PauseGuard(handle.store, config.layout.root).check(DeletingJob.L0)
        spark = build_spark_session(
            master,
            conf=spark_conf,
            package=package_to_ship(
                master, ship=config.spark.ship, package_dir=config.spark.package_dir
            ),
            log_level=args.spark_log_level or config.spark.log_level,
        )
        try:
            outcome = run_spark_gc(
                spark,
                spark_gc_settings_of(config),
                handle.store,
                handle.stats,
                handle.client_settings,
                options,
            )
        finally:
            spark.stop()
    s = outcome.summary
    return _print_run(
        s,
        args,
        {
            "summary_key": outcome.summary_key,
            "plan_prefix": outcome.plan_prefix,
            "manifest": outcome.manifest_key,
            "tasks": outcome.tasks,
        },
        plan=f"{outcome.plan_prefix}part-*.parquet" if outcome.plan_prefix else None,
        stopped=outcome.stopped_by_guard,
        details=f", {outcome.tasks} tasks"
        + (f", inventory {outcome.manifest_key}" if outcome.manifest_key else ""),
    )


def _cmd_spark_package(config: Config, args: argparse.Namespace) -> int:
    require("pyspark", SPARK, "epochgc spark package")
    from epochgc.gc.spark.package import EXECUTOR_PYTHON, default_package_dir, ensure_package  # noqa: PLC0415

    out = Path(args.out or config.spark.package_dir or default_package_dir())
    package = ensure_package(out, rebuild_environment=args.rebuild_environment)
    flags = (
        f"--py-files {package.code_zip} --archives {package.archives_entry} "
        f"--conf spark.pyspark.python={EXECUTOR_PYTHON}"
    )
    _print(
        {
            "code_zip": str(package.code_zip),
            "environment": str(package.environment),
            "archives": package.archives_entry,
            "executor_python": EXECUTOR_PYTHON,
            "spark_submit_flags": flags,
        },
        args,
        f"executors' package in {out}:\n  {package.code_zip.name} (epochgc, for --py-files)\n"
        f"  {package.environment.name} (boto3 + pyarrow, for --archives)\n"
        f"spark-submit {flags} scripts/spark_gc.py --config FILE",
    )
    return EXIT_OK


def _cmd_inventory_build(config: Config, args: argparse.Namespace) -> int:
    require("pyarrow", SPARK, "epochgc inventory build")
    from epochgc.storage.inventory import build_inventory, store_for_bucket  # noqa: PLC0415
    from epochgc.wiring.settings import inventory_location  # noqa: PLC0415

    location = inventory_location(config)
    prefix = config.layout.root + "/l0/" if args.prefix is None else args.prefix
    with open_store(config) as handle:
        source = store_for_bucket(handle.store, location.source_bucket)
        key = build_inventory(
            source,
            store_for_bucket(handle.store, location.bucket),
            location,
            source.list_objects(prefix),
            file_format="CSV" if args.format == "csv" else "Parquet",
            rows_per_file=args.rows_per_file or config.inventory.rows_per_file,
        )
    _print(
        {"manifest": key, "bucket": location.bucket},
        args,
        f"inventory of s3://{location.source_bucket}/{prefix} written: "
        f"s3://{location.bucket}/{key}",
    )
    return EXIT_OK


def _cmd_verify(config: Config, args: argparse.Namespace) -> int:
    # Imported here: only this command runs the whole system under faults.
    import tempfile  # noqa: PLC0415

    from epochgc.verify.run import run_verify, summary  # noqa: PLC0415

    if args.log_level is None:
        setup_logging("WARNING")
    failed = []
    for seed in args.seed:
        folder = Path(args.folder) / f"seed-{seed}" if args.folder else None
        with tempfile.TemporaryDirectory(prefix=f"epochgc-verify-{seed}-") as tmp:
            result = run_verify(
                seed,
                args.duration,
                folder or Path(tmp),
                spark=args.spark,
                unsafe_safe_epoch=args.unsafe_test_build,
                quiesce_timeout=args.quiesce_timeout,
                worker_log_level=args.worker_log_level,
            )
        print(summary(result), flush=True)
        if not result.ok:
            failed.append(seed)
            if args.stop_on_failure:
                break
    if len(args.seed) > 1:
        print(f"{len(failed)} of {len(args.seed)} seeds failed: {failed}")
    return EXIT_OK if not failed else EXIT_FAILED


def _cmd_embedded_s3(config: Config, args: argparse.Namespace) -> int:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with EmbeddedS3(bucket=config.store.bucket, host=args.host, port=args.port) as server:
        print(f"embedded S3 serving bucket {config.store.bucket!r} at {server.endpoint_url}")
        print("stop with Ctrl-C or SIGTERM; everything stored is lost then", flush=True)
        stop.wait()
    return EXIT_OK


def _print(data: object, args: argparse.Namespace, human: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else human)


def _cmd_topic_create(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        info = Controller(handle.store, config.layout.root).create_topic(args.name, args.partitions)
    _print(
        {"topic": info.name, "partitions": info.partitions, "revision": info.revision},
        args,
        f"created topic {info.name!r}: {counted(info.partitions, 'partition')}, "
        f"revision {info.revision}",
    )
    return EXIT_OK


def _cmd_topic_delete(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        outcome = Controller(handle.store, config.layout.root).delete_topic(
            args.name, revision=args.revision
        )
    _print(
        {
            "topic": outcome.topic,
            "revision": outcome.revision,
            "deleted_at": outcome.deleted_at,
            "entry_offset": outcome.entry_offset,
            "deleted_by_this_command": outcome.by_this_writer,
        },
        args,
        outcome.describe(),
    )
    return EXIT_OK if outcome.by_this_writer else EXIT_FAILED


def _cmd_topic_list(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, writes=False) as handle:
        view = Controller(handle.store, config.layout.root).snapshot()
    rows = [
        {"topic": t.name, "partitions": t.partitions, "revision": t.revision}
        for t in sorted(view.topics.values(), key=lambda t: t.name)
    ]
    lines = [f"{'topic':30} {'partitions':>10} {'revision':>10}"]
    lines += [f"{r['topic']:30} {r['partitions']:>10} {r['revision']:>10}" for r in rows]
    lines.append(f"controller offset (cluster epoch): {view.offset}")
    _print({"controller_offset": view.offset, "topics": rows}, args, "\n".join(lines))
    return EXIT_OK


def _cmd_node_list(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, writes=False) as handle:
        rows = list_nodes(handle.store, config.layout.root)
    lines = [
        f"{'node':32} {'lease':>8} {'incarnation':>12} {'owned':>6} {'report age':>11} "
        f"{'entries':>8} {'ignored':>8} {'roles':>6}"
    ]
    for r in rows:
        age = "-" if r.report_age_seconds is None else f"{r.report_age_seconds:.0f}s"
        incarnation = (r.incarnation or "-")[:12]
        lines.append(
            f"{r.node:32} {r.lease:>8} {incarnation:>12} {r.partitions_owned:>6} {age:>11} "
            f"{r.entries:>8} {r.ignored_entries:>8} {r.leases_held:>6}"
        )
    if not rows:
        lines.append("(no node has a report or a lease)")
    _print([dataclasses.asdict(r) for r in rows], args, "\n".join(lines))
    return EXIT_OK


def _cmd_node_forget(config: Config, args: argparse.Namespace) -> int:
    dead_after = timedelta(seconds=config.reports.dead_after_seconds)
    with open_store(config) as handle:
        impact = forget_node(handle.store, config.layout.root, args.node, dead_after=dead_after)
    if impact.lowers_m:
        lowered = ", ".join(str(p) for p in impact.partitions_lowered[:10])
        human = (
            f"forgot node {args.node}: M drops from {impact.safe_epoch_now} to "
            f"{impact.safe_epoch_without} until these partitions are reported again: {lowered}"
        )
    else:
        human = f"forgot node {args.node}: M stays at {impact.safe_epoch_now}"
    data = {
        "node": args.node,
        "safe_epoch_before": impact.safe_epoch_now,
        "safe_epoch_after": impact.safe_epoch_without,
        "lowers_m": impact.lowers_m,
        "partitions_lowered": [str(p) for p in impact.partitions_lowered],
    }
    _print(data, args, human)
    return EXIT_OK


def _cmd_epoch_show(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, writes=False) as handle:
        epoch = Controller(handle.store, config.layout.root).current_epoch()
    _print({"cluster_epoch": epoch}, args, f"cluster epoch: {epoch}")
    return EXIT_OK


def _cmd_epoch_tick(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        epoch = Controller(handle.store, config.layout.root).tick()
    _print({"cluster_epoch": epoch}, args, f"cluster epoch is now {epoch}")
    return EXIT_OK


def _open_replica(config: Config, store: ObjectStore, args: argparse.Namespace) -> PartitionReplica:
    topic = Controller(store, config.layout.root).topic(args.topic)
    replica = PartitionReplica(store, config.layout.root, topic.partition_id(args.partition))
    replica.open()
    return replica


def _cmd_partition_compact(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        replica = _open_replica(config, handle.store, args)
        snapshotted = replica.write_snapshot()
        truncated = replica.truncate()
    covered = replica.state.applied_log_offset
    _print(
        {"snapshot_written": snapshotted, "covered_offset": covered, "truncated": truncated},
        args,
        f"{args.topic}/{args.partition}: snapshot at log offset {covered} "
        f"({'written' if snapshotted else 'already current'}), {truncated} entries truncated",
    )
    return EXIT_OK


def _cmd_controller_compact(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        controller = Controller(
            handle.store, config.layout.root, epoch_history=config.controller.epoch_history
        )
        before = handle.stats.total()
        result = controller.compact(min_entries=args.min_entries)
        requests = handle.stats.total() - before
    if result.skipped:
        human = (
            f"controller compaction skipped: {result.entries_above_snapshot} entries above the "
            f"snapshot at offset {result.snapshot_offset} (fewer than --min-entries "
            f"{args.min_entries}); {requests} requests"
        )
    else:
        whose = "written" if result.snapshot_written else "written by another compactor"
        human = (
            f"controller snapshot at offset {result.snapshot_offset} ({whose}); "
            f"{result.entries_deleted} log entries deleted; {requests} requests"
        )
    _print({**dataclasses.asdict(result), "requests": requests}, args, human)
    return EXIT_OK


def _cmd_epoch_advance(config: Config, args: argparse.Namespace) -> int:
    target: int = args.to
    progress: list[ProgressLog] = []

    def started(current: int) -> None:
        # Each tick is one request: a long advance takes seconds, so say
        # what is happening before the first one and then every few seconds.
        steps = target - current
        log.info(
            "advancing the cluster epoch from %d to %d (%d ticks, one controller-log object each)",
            current,
            target,
            steps,
        )
        progress.append(ProgressLog(log, "epoch advance", steps, unit="ticks"))

    def ticked(_epoch: int) -> None:
        progress[0].advance()

    with open_store(config) as handle:
        epoch = Controller(handle.store, config.layout.root).advance_to(
            target, on_start=started, on_tick=ticked
        )
    _print({"cluster_epoch": epoch}, args, f"cluster epoch is now {epoch}")
    return EXIT_OK


def _cmd_partition_show(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, writes=False) as handle:
        replica = _open_replica(config, handle.store, args)
        state = replica.state
    data = dataclasses.asdict(state)
    data["safe_epoch"] = state.safe_epoch
    data["hole"] = replica.hole
    human = "\n".join(f"{key:28} {value}" for key, value in data.items())
    _print(data, args, f"{args.topic}/{args.partition}\n{human}")
    return EXIT_OK


Command = Callable[[Config, argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and documentation)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="FILE",
        help="TOML configuration (default: built-in defaults + EPOCHGC_* environment)",
    )
    common.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="overrides [logging] level",
    )
    reporting = argparse.ArgumentParser(add_help=False, parents=[common])
    reporting.add_argument("--json", action="store_true", help="machine-readable output")
    parser = argparse.ArgumentParser(
        prog="epochgc",
        description="Epoch-watermark garbage collector for temporary L0 objects in S3.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_store_commands(sub, common, reporting)
    _add_node_commands(sub, common, reporting)
    _add_watermark_commands(sub, reporting)
    _add_gc_commands(sub, common, reporting)
    return parser


def _add_gc_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    reporting: argparse.ArgumentParser,
) -> None:
    gc = sub.add_parser("gc", help="the collector")
    gc_sub = gc.add_subparsers(dest="gc_command", required=True, metavar="ACTION")
    collect = gc_sub.add_parser(
        "collect", parents=[reporting], help="one collection round now (local engine)"
    )
    collect.add_argument(
        "--dry-run",
        action="store_true",
        help="delete nothing; write the plan as Parquet (runs even while paused)",
    )
    collect.add_argument(
        "--force",
        action="store_true",
        help="bypass the delete-fraction guard ([gc] max_delete_fraction); nothing else "
        "(a pause still stops the round)",
    )
    collect.add_argument(
        "--all-shards",
        action="store_true",
        help="list every shard now, not only those the cost-aware schedule picks "
        "([gc] max_lag_seconds)",
    )
    collect.add_argument(
        "--engine",
        choices=["local"],
        default="local",
        help="where the round runs: local (a thread pool in this process)",
    )
    collect.set_defaults(handler=_cmd_gc_collect)
    info = gc_sub.add_parser(
        "epoch-info",
        parents=[reporting],
        help="cluster epoch, M, lag and the partitions that pin M",
    )
    info.add_argument("--top", type=int, default=10, help="pinning partitions to show")
    info.set_defaults(handler=_cmd_gc_epoch_info)
    explained = gc_sub.add_parser(
        "explain",
        parents=[reporting],
        help="whether one object is deletable now, and why (exit 0 whatever the answer)",
    )
    explained.add_argument(
        "key", help="the object key, e.g. epochgc/l0/003/000000000000000042/UUID"
    )
    explained.add_argument(
        "--top", type=int, default=10, metavar="K", help="pinning partitions considered (10)"
    )
    explained.set_defaults(handler=cmd_gc_explain)
    runs = gc_sub.add_parser("runs", parents=[reporting], help="recent run summaries")
    runs.add_argument("--limit", type=int, default=20)
    runs.set_defaults(handler=_cmd_gc_runs)
    gc_sub.add_parser(
        "status",
        parents=[reporting],
        help="requested state, gc and ticker lease holders, daemon state, M",
    ).set_defaults(handler=_cmd_gc_status)
    paused = gc_sub.add_parser(
        "pause", parents=[reporting], help="stop every collector deleting (kept in the bucket)"
    )
    paused.add_argument("--reason", default="", help="recorded with the pause")
    paused.set_defaults(handler=_cmd_gc_pause)
    gc_sub.add_parser("resume", parents=[reporting], help="undo pause").set_defaults(
        handler=_cmd_gc_resume
    )
    gc_sub.add_parser(
        "reset",
        parents=[reporting],
        help="clear safety_blocked once the controller log / reports are fixed",
    ).set_defaults(handler=_cmd_gc_reset)
    spark = gc_sub.add_parser(
        "spark",
        parents=[reporting],
        help="the deletion job on Spark: live listing or the newest S3 Inventory",
    )
    spark.add_argument("--mode", choices=["listing", "inventory"], default="listing")
    spark.add_argument(
        "--dry-run",
        action="store_true",
        help="delete nothing; write the plan (runs even while paused)",
    )
    spark.add_argument(
        "--force",
        action="store_true",
        help="bypass the delete-fraction guard ([gc] max_delete_fraction); nothing else",
    )
    spark.add_argument(
        "--max-epoch",
        type=int,
        metavar="N",
        help="use this M (at most the computed one, unless --allow-max-epoch-above-m)",
    )
    spark.add_argument(
        "--allow-max-epoch-above-m",
        action="store_true",
        help="accept a --max-epoch above the computed M (objects above M may still be "
        "needed: at your own risk); never above the cluster epoch",
    )
    spark.add_argument("--master", help="Spark master (default: [spark] master)")
    spark.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable; over [spark] conf; see docs/spark.md)",
    )
    spark.add_argument(
        "--spark-log-level",
        choices=SPARK_LOG_LEVELS,
        help="Spark's own log level (default: [spark] log_level, WARN)",
    )
    spark.set_defaults(handler=_cmd_gc_spark)
    shipping = sub.add_parser("spark", help="what Spark executors need (docs/spark.md)")
    shipping_sub = shipping.add_subparsers(dest="spark_command", required=True, metavar="ACTION")
    package = shipping_sub.add_parser(
        "package",
        parents=[reporting],
        help="build the code zip (--py-files) and the packed environment (--archives)",
    )
    package.add_argument(
        "--out", metavar="DIR", help="output folder (default: [spark] package_dir)"
    )
    package.add_argument(
        "--rebuild-environment",
        action="store_true",
        help="build the environment archive again even if it exists",
    )
    package.set_defaults(handler=_cmd_spark_package)
    daemon = sub.add_parser(
        "daemon",
        parents=[common],
        help="the scheduled collector: GC rounds under the gc lease, epoch ticks, /metrics",
    )
    daemon.add_argument("--node-id", help="overrides [daemon] node_id")
    daemon.add_argument(
        "--duration", type=float, help="stop after this many seconds (default: until SIGTERM)"
    )
    daemon.set_defaults(handler=_cmd_daemon)


def _add_store_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    reporting: argparse.ArgumentParser,
) -> None:
    check = sub.add_parser(
        "check-store",
        parents=[reporting],
        help="probe the bucket for conditional writes, batch deletes and list order",
    )
    check.set_defaults(handler=_cmd_check_store)
    sub.add_parser(
        "migrate",
        parents=[reporting],
        help="rewrite a bucket written by an older epochgc (layout 1) to layout 2; "
        "stop every node and daemon first",
    ).set_defaults(handler=_cmd_migrate)
    config_cmd = sub.add_parser("config", help="configuration tools")
    config_sub = config_cmd.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    show = config_sub.add_parser(
        "show", parents=[reporting], help="print the effective configuration (secrets masked)"
    )
    show.set_defaults(handler=_cmd_config_show)
    serve = sub.add_parser(
        "embedded-s3",
        parents=[common],
        help="serve an in-memory S3 (moto) for local runs until SIGTERM",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    serve.add_argument("--port", type=int, default=9000, help="port (0 picks a free one)")
    serve.set_defaults(handler=_cmd_embedded_s3)


def _add_node_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    reporting: argparse.ArgumentParser,
) -> None:
    recon = sub.add_parser(
        "reconciler",
        parents=[common],
        help="run a reconciler node (leases, reconcile, housekeeping, reports) until SIGTERM",
    )
    recon.add_argument("--node-id", help="overrides [reconciler] node_id")
    recon.add_argument(
        "--duration", type=float, help="stop after this many seconds (default: run until SIGTERM)"
    )
    recon.set_defaults(handler=_cmd_reconciler)
    produce = sub.add_parser(
        "produce",
        parents=[reporting],
        help="smoke-test the write path: lead, produce records, reconcile, read back",
    )
    produce.add_argument("topic")
    produce.add_argument("partition", type=int)
    produce.add_argument("--record", action="append", default=[], help="a record (repeatable)")
    produce.add_argument("--count", type=int, default=10, help="records to generate otherwise")
    produce.add_argument(
        "--create-partitions",
        type=int,
        metavar="N",
        help="create the topic with N partitions first if it does not exist",
    )
    produce.set_defaults(handler=_cmd_produce)
    inventory = sub.add_parser("inventory", help="S3 Inventory reports")
    inventory_sub = inventory.add_subparsers(
        dest="inventory_command", required=True, metavar="ACTION"
    )
    build = inventory_sub.add_parser(
        "build",
        parents=[reporting],
        help="write an inventory report in AWS's format from a live listing",
    )
    build.add_argument("--format", choices=["csv", "parquet"], default="parquet")
    build.add_argument(
        "--prefix", help="what to inventory (default: the L0 prefix; '' for the whole bucket)"
    )
    build.add_argument("--rows-per-file", type=int, help="overrides [inventory] rows_per_file")
    build.set_defaults(handler=_cmd_inventory_build)
    verify = sub.add_parser(
        "verify",
        parents=[common],
        help="randomized end-to-end safety run under injected faults, then the checks",
    )
    verify.add_argument(
        "--seed", type=int, nargs="+", required=True, help="one or more seeds (one run each)"
    )
    verify.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    verify.add_argument("--spark", action="store_true", help="run a Spark GC job mid-way")
    verify.add_argument("--folder", help="keep each run's logs and records here")
    verify.add_argument(
        "--quiesce-timeout",
        type=float,
        default=90.0,
        help="seconds allowed after the faults stop for everything <= M to go",
    )
    verify.add_argument(
        "--stop-on-failure", action="store_true", help="stop at the first seed that fails"
    )
    verify.add_argument(
        "--unsafe-test-build",
        action="store_true",
        help="publish M(p) = max_applied_epoch - 1 (a broken build the checks must catch)",
    )
    verify.add_argument(
        "--worker-log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        default="WARNING",
        help="log level of the node and daemon processes (their logs are in --folder)",
    )
    verify.set_defaults(handler=_cmd_verify)
    demo = sub.add_parser(
        "demo",
        parents=[common],
        help="producers, reconcilers and the GC daemon on the embedded S3, then a check",
    )
    demo.add_argument("--duration", type=float, default=60.0, help="seconds of workload")
    demo.add_argument("--seed", type=int, default=1, help="the workload's random seed")
    demo.set_defaults(handler=_cmd_demo)


def _add_watermark_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    reporting: argparse.ArgumentParser,
) -> None:
    node = sub.add_parser("node", help="nodes known by their reports and leases")
    node_sub = node.add_subparsers(dest="node_command", required=True, metavar="ACTION")
    node_sub.add_parser(
        "list",
        parents=[reporting],
        help="nodes: node lease, partitions owned, report age, entries, roles held",
    ).set_defaults(handler=_cmd_node_list)
    forget = node_sub.add_parser(
        "forget",
        parents=[reporting],
        help="delete a gone node's report (refuses a live node; says whether M drops)",
    )
    forget.add_argument("node")
    forget.set_defaults(handler=_cmd_node_forget)
    topic = sub.add_parser("topic", help="create, list and delete topics (controller log)")
    topic_sub = topic.add_subparsers(dest="topic_command", required=True, metavar="ACTION")
    create = topic_sub.add_parser("create", parents=[reporting], help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, required=True)
    create.set_defaults(handler=_cmd_topic_create)
    listing = topic_sub.add_parser("list", parents=[reporting], help="live topics")
    listing.set_defaults(handler=_cmd_topic_list)
    delete = topic_sub.add_parser("delete", parents=[reporting], help="delete a topic")
    delete.add_argument("name")
    delete.add_argument(
        "--revision",
        type=int,
        default=None,
        help="delete only this incarnation (as `topic list` shows it); refused if another is live",
    )
    delete.set_defaults(handler=_cmd_topic_delete)

    epoch = sub.add_parser("epoch", help="the cluster epoch")
    epoch_sub = epoch.add_subparsers(dest="epoch_command", required=True, metavar="ACTION")
    epoch_sub.add_parser("show", parents=[reporting], help="current epoch").set_defaults(
        handler=_cmd_epoch_show
    )
    epoch_sub.add_parser(
        "tick", parents=[reporting], help="append one epoch_tick now"
    ).set_defaults(handler=_cmd_epoch_tick)
    advance = epoch_sub.add_parser(
        "advance",
        parents=[reporting],
        help="tick until the epoch reaches --to (refuses a value not above the current one)",
    )
    advance.add_argument("--to", type=int, required=True, metavar="EPOCH")
    advance.set_defaults(handler=_cmd_epoch_advance)

    controller = sub.add_parser("controller", help="the controller log")
    controller_sub = controller.add_subparsers(
        dest="controller_command", required=True, metavar="ACTION"
    )
    compact = controller_sub.add_parser(
        "compact",
        parents=[reporting],
        help="snapshot the controller log now and delete the entries the snapshot covers "
        "(never the newest)",
    )
    compact.add_argument(
        "--min-entries",
        type=int,
        default=1,
        metavar="N",
        help="do nothing while fewer than N entries are above the snapshot (default 1)",
    )
    compact.set_defaults(handler=_cmd_controller_compact)

    partition = sub.add_parser("partition", help="partition state machines")
    partition_sub = partition.add_subparsers(
        dest="partition_command", required=True, metavar="ACTION"
    )
    for name, handler, text in (
        ("show", _cmd_partition_show, "replayed state, window and M(p) of a partition"),
        (
            "compact",
            _cmd_partition_compact,
            "snapshot a partition now and truncate its log below min(lro+1, retention hint)",
        ),
    ):
        action = partition_sub.add_parser(name, parents=[reporting], help=text)
        action.add_argument("topic")
        action.add_argument("partition", type=int)
        action.set_defaults(handler=handler)
    skip = partition_sub.add_parser(
        "skip",
        parents=[reporting],
        help="record records lro+1..OFFSET of a stuck partition as lost, so it moves on",
    )
    skip.add_argument("topic")
    skip.add_argument("partition", type=int)
    skip.add_argument(
        "--through",
        type=int,
        required=True,
        metavar="OFFSET",
        help="last record offset to record as lost (the end of a placeholder)",
    )
    skip.add_argument(
        "--accept-data-loss",
        action="store_true",
        help="required: those records are gone for good (without it, only the plan is shown)",
    )
    skip.add_argument("--reason", default="", help="why, for the record readers are shown")
    skip.set_defaults(handler=cmd_partition_skip)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``epochgc`` console script."""
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"epochgc: configuration error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(args.log_level or log_level_of(config))
    handler: Command = args.handler
    try:
        return handler(config, args)
    except EpochGCError as err:
        log.error("%s: %s", type(err).__name__, err)
        if isinstance(err, StoreCapabilityError) and err.table:
            print(err.table, file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        log.warning("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
