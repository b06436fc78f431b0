"""The ``epochgc`` command line.

Each sub-command loads and validates the configuration before doing any
work (a bad value exits 2 with file, key and reason), sets up logging once,
and exits non-zero on failure. Nothing imports this module.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

from epochgc.config import Config, load_config, log_level_of
from epochgc.errors import ConfigError, EpochGCError, TopicNotFoundError
from epochgc.gc.collect import CollectSettings, collect_once, list_runs
from epochgc.gc.run_report import decode_summary, encode_summary
from epochgc.logging_setup import setup_logging
from epochgc.reconciler.service import produce_and_verify, run_reconciler
from epochgc.runtime import open_store
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import gc_run_summary_key
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.probe import format_probe_table, run_probes
from epochgc.watermarks.aggregate import SafeEpochTracker
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.replica import PartitionReplica
from epochgc.watermarks.safe_epoch import compute_safe_epoch

log = logging.getLogger("epochgc.cli")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2


def _cmd_check_store(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        results = run_probes(handle.store, config.layout.root)
    if args.json:
        print(
            json.dumps(
                {
                    "bucket": config.store.bucket,
                    "ok": all(r.passed for r in results),
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


def _cmd_config_show(config: Config, args: argparse.Namespace) -> int:
    print(json.dumps(config.describe(), indent=2))
    return EXIT_OK


def _cmd_reconciler(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        node = asyncio.run(
            run_reconciler(
                config, handle.store, node_id=args.node_id, duration_seconds=args.duration
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


def _collect_settings(config: Config) -> CollectSettings:
    g = config.gc
    return CollectSettings(
        shards=config.layout.l0_shards,
        min_object_age=timedelta(seconds=g.min_object_age_seconds),
        max_delete_fraction=g.max_delete_fraction,
        shard_concurrency=g.shard_concurrency,
        delete_concurrency=g.delete_concurrency,
        rate_limit_keys_per_second=g.rate_limit_keys_per_second or None,
    )


def _cmd_gc_collect(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        outcome = collect_once(
            handle.store,
            handle.stats,
            config.layout.root,
            _collect_settings(config),
            dry_run=args.dry_run,
            force=args.force,
        )
    s = outcome.summary
    data = {
        **json.loads(encode_summary(s)),
        "summary_key": outcome.summary_key,
        "plan_key": outcome.plan_key,
        "stopped": outcome.stopped_by_guard,
    }
    human = (
        f"run {s.run_id}{' (dry run)' if s.dry_run else ''}: M={s.safe_epoch} "
        f"(controller offset {s.controller_offset}); listed {s.listed}, eligible {s.eligible}, "
        f"deleted {s.deleted} ({s.bytes_deleted} bytes), errors {s.errors}; "
        f"skipped {dict(s.skipped)}"
    )
    if outcome.plan_key:
        human += f"\nplan: {outcome.plan_key}"
    if outcome.stopped_by_guard:
        human += f"\nSTOPPED: {outcome.stopped_by_guard}"
    _print(data, args, human)
    return EXIT_OK if s.success else EXIT_FAILED


def _cmd_gc_epoch_info(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        controller = Controller(handle.store, config.layout.root)
        safe = compute_safe_epoch(
            controller,
            handle.store,
            config.layout.root,
            SafeEpochTracker(blocked_after=1),
            pinning=args.top,
        )
        cluster_epoch = controller.current_epoch()
    if safe is None:
        print("safety_blocked: M cannot be computed from trusted inputs", file=sys.stderr)
        return EXIT_FAILED
    pinning = [
        {"topic": w.topic, "partition": w.partition, "safe_epoch": w.safe_epoch, "node": w.node}
        for w in safe.pinning
    ]
    data = {
        "cluster_epoch": cluster_epoch,
        "safe_epoch": safe.safe_epoch,
        "lag": cluster_epoch - safe.safe_epoch,
        "controller_offset": safe.controller_offset,
        "partitions": safe.partitions,
        "unreported_partitions": safe.unreported,
        "oldest_report_at": safe.oldest_report_at,
        "pinning": pinning,
    }
    lag = cluster_epoch - safe.safe_epoch
    lines = [
        f"cluster epoch {cluster_epoch}, M {safe.safe_epoch} (lag {lag}); "
        f"{safe.partitions} live partitions, {safe.unreported} without a report",
        f"{'pinning partition':40} {'M(p)':>8}  reported by",
    ]
    lines += [
        f"{w.topic + '/' + str(w.partition):40} {w.safe_epoch:>8}  "
        f"{w.node or '(no report: revision - 1)'}"
        for w in safe.pinning
    ]
    _print(data, args, "\n".join(lines))
    return EXIT_OK


def _cmd_gc_runs(config: Config, args: argparse.Namespace) -> int:
    rows = []
    with open_store(config) as handle:
        for run_id in list_runs(handle.store, config.layout.root, args.limit):
            key = gc_run_summary_key(config.layout.root, run_id)
            try:
                rows.append(json.loads(encode_summary(decode_summary(handle.store.get(key).body))))
            except EpochGCError as err:
                rows.append({"run_id": run_id, "error": str(err)})
    lines = [
        f"{r['run_id']:28} {r.get('engine', '?'):8} M={r.get('safe_epoch', '?'):<8} "
        f"deleted={r.get('deleted', '?'):<8} errors={r.get('errors', '?'):<4} "
        f"{'ok' if r.get('success') else 'FAILED'}{' dry-run' if r.get('dry_run') else ''}"
        for r in rows
    ]
    _print(rows, args, "\n".join(lines) or "no runs yet")
    return EXIT_OK


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
        f"created topic {info.name!r}: {info.partitions} partitions, revision {info.revision}",
    )
    return EXIT_OK


def _cmd_topic_delete(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        offset = Controller(handle.store, config.layout.root).delete_topic(args.name)
    _print(
        {"topic": args.name, "deleted_at": offset},
        args,
        f"deleted topic {args.name!r} at offset {offset}",
    )
    return EXIT_OK


def _cmd_topic_list(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
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


def _cmd_epoch_show(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
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
    if not 0 <= args.partition < topic.partitions:
        raise TopicNotFoundError(
            f"topic {args.topic!r} has partitions 0..{topic.partitions - 1}, not {args.partition}"
        )
    replica = PartitionReplica(
        store, config.layout.root, args.topic, args.partition, revision=topic.revision
    )
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


def _cmd_epoch_advance(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        epoch = Controller(handle.store, config.layout.root).advance_to(args.to)
    _print({"cluster_epoch": epoch}, args, f"cluster epoch is now {epoch}")
    return EXIT_OK


def _cmd_partition_show(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
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
    _add_gc_commands(sub, reporting)
    return parser


def _add_gc_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    reporting: argparse.ArgumentParser,
) -> None:
    gc = sub.add_parser("gc", help="the collector")
    gc_sub = gc.add_subparsers(dest="gc_command", required=True, metavar="ACTION")
    collect = gc_sub.add_parser(
        "collect", parents=[reporting], help="one collection round now (local engine)"
    )
    collect.add_argument(
        "--dry-run", action="store_true", help="delete nothing; write the plan as Parquet"
    )
    collect.add_argument(
        "--force", action="store_true", help="go ahead even past [gc] max_delete_fraction"
    )
    collect.set_defaults(handler=_cmd_gc_collect)
    info = gc_sub.add_parser(
        "epoch-info",
        parents=[reporting],
        help="cluster epoch, M, lag and the partitions that pin M",
    )
    info.add_argument("--top", type=int, default=10, help="pinning partitions to show")
    info.set_defaults(handler=_cmd_gc_epoch_info)
    runs = gc_sub.add_parser("runs", parents=[reporting], help="recent run summaries")
    runs.add_argument("--limit", type=int, default=20)
    runs.set_defaults(handler=_cmd_gc_runs)


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
    config_cmd = sub.add_parser("config", help="configuration tools")
    config_sub = config_cmd.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    show = config_sub.add_parser(
        "show", parents=[common], help="print the effective configuration (secrets masked)"
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


def _add_watermark_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    reporting: argparse.ArgumentParser,
) -> None:
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
        return EXIT_FAILED
    except KeyboardInterrupt:
        log.warning("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
