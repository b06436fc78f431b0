"""``epochgc gc ...`` (the collector: one round, M and its pins, one
object's verdict, run reports, status, pause/resume/reset) and ``epochgc
daemon``, the scheduled collector. ``gc spark`` is in ``spark_commands``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import socket
import sys
from collections.abc import Mapping
from datetime import UTC, datetime

from epochgc.cli.arguments import add_command, add_noun, add_process_options
from epochgc.cli.output import EXIT_FAILED, EXIT_OK, SubParsers, dollars, emit, operator, print_run
from epochgc.cli.spark_commands import add_gc_spark
from epochgc.config import Config
from epochgc.errors import CollectorPausedError, InvalidArgumentError
from epochgc.extras import BASE, require
from epochgc.gc.collection_round import collect_once
from epochgc.gc.control import (
    ControlDocument,
    pause,
    read_control,
    read_status,
    request_reset,
    resume,
)
from epochgc.gc.daemon.scheduler import GC_LEASE
from epochgc.gc.deletion_record import deleted_keys
from epochgc.gc.explain import explain, explanation_view, read_explain_inputs
from epochgc.gc.presence import read_presences
from epochgc.gc.run_report import recent_runs, run_figures, run_is_kept
from epochgc.gc.status import StatusInputs, epoch_info_view, read_epoch_info, status_view
from epochgc.leases.role_leases import LeaseManager
from epochgc.metrics.push import COLLECT_JOB, push_run
from epochgc.storage.bucket_settings import ensure_bucket_fit_for_collector
from epochgc.storage.s3 import S3ObjectStore
from epochgc.watermarks.ticker import TICKER_LEASE
from epochgc.wiring.daemon_process import run_daemon
from epochgc.wiring.settings import collect_settings_of, prices_of
from epochgc.wiring.store import open_store


def register(sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``gc`` and its actions."""
    gc_sub = add_noun(sub, "gc", "the collector")
    collect = add_command(
        gc_sub, "collect", _cmd_gc_collect, reporting, "one collection round now (local engine)"
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
    info = add_command(
        gc_sub,
        "epoch-info",
        _cmd_gc_epoch_info,
        reporting,
        "cluster epoch, M, lag and the partitions that pin M",
    )
    info.add_argument("--top", type=int, default=10, help="pinning partitions to show")
    explained = add_command(
        gc_sub,
        "explain",
        _cmd_gc_explain,
        reporting,
        "whether one object is deletable now, and why (exit 0 whatever the answer)",
    )
    explained.add_argument(
        "key", help="the object key, e.g. epochgc/l0/003/000000000000000042/UUID"
    )
    explained.add_argument(
        "--top", type=int, default=10, metavar="K", help="pinning partitions considered (10)"
    )
    runs = add_command(
        gc_sub,
        "runs",
        _cmd_gc_runs,
        reporting,
        "recent run summaries, or with --deleted the keys one run deleted",
    )
    runs.add_argument("--limit", type=int, default=20)
    runs.add_argument(
        "--deleted",
        metavar="RUN",
        help="list the keys run RUN deleted (its deletion record: key, size, epoch, shard, M)",
    )
    add_command(
        gc_sub,
        "status",
        _cmd_gc_status,
        reporting,
        "requested state, gc and ticker lease holders, daemon state, M",
    )
    paused = add_command(
        gc_sub,
        "pause",
        _cmd_gc_pause,
        reporting,
        "stop every collector deleting (kept in the bucket)",
    )
    paused.add_argument("--reason", default="", help="recorded with the pause")
    add_command(gc_sub, "resume", _cmd_gc_resume, reporting, "undo pause")
    add_command(
        gc_sub,
        "reset",
        _cmd_gc_reset,
        reporting,
        "clear safety_blocked once the controller log / reports are fixed",
    )
    add_gc_spark(gc_sub, reporting)


def register_daemon(sub: SubParsers, common: argparse.ArgumentParser) -> None:
    """``daemon``."""
    daemon = add_command(
        sub,
        "daemon",
        _cmd_daemon,
        common,
        "the scheduled collector: GC rounds under the gc lease, epoch ticks, /metrics",
    )
    add_process_options(daemon, "daemon", "until SIGTERM")


PARQUET = "pyarrow.parquet"
"""What plans and deletion records are written and read with (base install)."""


def _require_parquet(needed_by: str) -> None:
    """Fail before the store is touched when the round could not write its
    plan or its deletion record: not after the probes have written, M has
    been read and (a dry run) every shard listed."""
    require(PARQUET, BASE, needed_by)


def _cmd_gc_collect(config: Config, args: argparse.Namespace) -> int:
    if args.dry_run or config.gc.record_deletions:
        _require_parquet("gc collect")
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
            events=handle.events,
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
    return print_run(
        s,
        args,
        {"summary_key": outcome.summary_key, "plan_key": outcome.plan_key},
        plan=outcome.plan_key,
        stopped=outcome.stopped_by_guard,
        listed_up_to_m=args.force or config.gc.max_delete_fraction >= 1.0,
    )


def _cmd_gc_epoch_info(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, writes=False) as handle:
        info = read_epoch_info(handle.store, config.layout.root, pinning=args.top)
    if info.safe is None:
        print(f"safety_blocked: untrusted M inputs: {info.untrusted}", file=sys.stderr)
        return EXIT_FAILED
    data, lines = epoch_info_view(info.cluster_epoch, info.safe)
    emit(data, args, "\n".join(lines))
    return EXIT_OK


def _cmd_gc_explain(config: Config, args: argparse.Namespace) -> int:
    """Say whether one object is deletable now and why. Exit 0 whatever the
    verdict (it is a question); 1 only when the inputs cannot be read."""
    _require_parquet("gc explain")  # a missing key is looked up in deletion records
    settings = collect_settings_of(config)
    now = datetime.now(UTC)
    with open_store(config, writes=False) as handle:
        inputs = read_explain_inputs(
            handle.store,
            config.layout.root,
            args.key,
            min_object_age=settings.min_object_age,
            max_delete_fraction=settings.max_delete_fraction,
            pinning=args.top,
            now=now,
        )
    data, lines = explanation_view(args.key, explain(inputs))
    emit(data, args, "\n".join(lines))
    return EXIT_OK


def _unparseable_cell(row: Mapping[str, object]) -> str:
    """``; 8 unparseable, e.g. KEY`` for a run that skipped keys it can
    never delete (its summary names a few), else nothing."""
    skipped = row.get("skipped")
    count = skipped.get("unparseable", 0) if isinstance(skipped, dict) else 0
    if not count:
        return ""
    keys = row.get("unparseable_keys")
    example = f", e.g. {keys[0]}" if isinstance(keys, list) and keys else ""
    return f"; {count} unparseable{example}"


def _cmd_gc_runs(config: Config, args: argparse.Namespace) -> int:
    if args.deleted is not None:
        return _cmd_gc_runs_deleted(config, args)
    prices = prices_of(config)
    with open_store(config, writes=False) as handle:
        rows = recent_runs(handle.store, config.layout.root, prices, args.limit)
    lines = [
        f"{r['run_id']:28} {r.get('engine', '?'):15} {r.get('safe_epoch', '?'):>8} "
        f"{r.get('deleted', '?'):>9} {r.get('errors', '?'):>6} "
        f"{dollars(r.get('cost_usd')):>10} {dollars(r.get('usd_per_gb')):>10}  "
        f"{'ok' if r.get('success') else 'FAILED'}{' dry-run' if r.get('dry_run') else ''}"
        f"{': ' + str(r['cause']) if r.get('cause') else ''}{_unparseable_cell(r)}"
        for r in rows
    ]
    header = (
        f"{'run':28} {'engine':15} {'M':>8} {'deleted':>9} {'errors':>6} "
        f"{'cost $':>10} {'$/GB':>10}  outcome"
    )
    emit(rows, args, "\n".join([header, *lines]) if lines else "no runs yet")
    return EXIT_OK


def _cmd_gc_runs_deleted(config: Config, args: argparse.Namespace) -> int:
    """The keys one run deleted, streamed part by part (``--json``: one
    object per line, so a million keys never sit in memory)."""
    _require_parquet("gc runs --deleted")
    run_id = args.deleted
    shown = 0
    with open_store(config, writes=False) as handle:
        try:
            kept = run_is_kept(handle.store, config.layout.root, run_id)
        except ValueError as err:
            raise InvalidArgumentError(f"--deleted: {err}") from err
        if not kept:
            raise InvalidArgumentError(
                f"no run {run_id!r} under {config.layout.root}/gc/runs/ (`epochgc gc runs` "
                "lists them; runs older than gc.runs_retention_days are deleted)"
            )
        for row in deleted_keys(handle.store, config.layout.root, run_id):
            if args.json:
                print(json.dumps(dataclasses.asdict(row)))
            else:
                if shown == 0:
                    print(f"{'key':64} {'size':>10} {'epoch':>8} {'shard':>5} {'M':>8}")
                print(f"{row.key:64} {row.size:>10} {row.epoch:>8} {row.shard:>5} {row.m:>8}")
            shown += 1
    if shown == 0 and not args.json:
        print(
            f"run {run_id} has no deletion record (it deleted nothing, was a dry run, or "
            "ran with gc.record_deletions = false)"
        )
    return EXIT_OK


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
    emit(data, args, "\n".join(lines))
    return EXIT_OK


def _cmd_gc_pause(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        doc = pause(
            handle.store,
            config.layout.root,
            by=operator(),
            reason=args.reason,
            now=datetime.now(UTC),
        )
    emit(
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
        doc = resume(handle.store, config.layout.root, by=operator(), now=datetime.now(UTC))
    emit(_control_data(doc), args, "collector resumed")
    return EXIT_OK


def _cmd_gc_reset(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        doc = request_reset(handle.store, config.layout.root, by=operator(), now=datetime.now(UTC))
    emit(
        _control_data(doc),
        args,
        f"reset requested (generation {doc.reset_generation}): a safety_blocked collector "
        "retries computing M at its next round",
    )
    return EXIT_OK


def _cmd_daemon(config: Config, args: argparse.Namespace) -> int:
    if config.gc.record_deletions:
        # Otherwise it runs on, every round failing as it opens its record.
        _require_parquet("daemon")

    def check_bucket(store: S3ObjectStore) -> None:
        ensure_bucket_fit_for_collector(store, config.layout.root)

    with open_store(config, before_writes=check_bucket) as handle:
        daemon = run_daemon(
            config,
            handle.store,
            handle.stats,
            node_id=args.node_id,
            duration_seconds=args.duration,
            events=handle.events,
        )
    print(f"gc daemon stopped after {daemon.rounds} rounds ({daemon.collector.state.value})")
    return EXIT_OK
