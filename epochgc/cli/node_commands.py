"""What runs a reconciler node and what is known of the nodes: ``epochgc
reconciler`` (a node until SIGTERM), ``epochgc produce`` (a smoke test of
the write path through a node's leader) and ``epochgc node list|forget``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from datetime import timedelta
from typing import NoReturn

from epochgc.cli.arguments import (
    add_command,
    add_noun,
    add_partition_arguments,
    add_process_options,
)
from epochgc.cli.output import EXIT_FAILED, EXIT_OK, SubParsers, emit, exit_at_once
from epochgc.config import Config
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.known_nodes import forget_node, list_nodes
from epochgc.wiring.reconciler_process import produce_and_verify, run_reconciler
from epochgc.wiring.store import open_store


def register_runners(
    sub: SubParsers, common: argparse.ArgumentParser, reporting: argparse.ArgumentParser
) -> None:
    """``reconciler`` and ``produce``."""
    recon = add_command(
        sub,
        "reconciler",
        _cmd_reconciler,
        common,
        "run a reconciler node (leases, reconcile, housekeeping, reports) until SIGTERM",
    )
    add_process_options(recon, "reconciler", "run until SIGTERM")
    produce = add_command(
        sub,
        "produce",
        _cmd_produce,
        reporting,
        "smoke-test the write path: lead, produce records, reconcile, read back",
    )
    add_partition_arguments(produce)
    produce.add_argument("--record", action="append", default=[], help="a record (repeatable)")
    produce.add_argument("--count", type=int, default=10, help="records to generate otherwise")
    produce.add_argument(
        "--create-partitions",
        type=int,
        metavar="N",
        help="create the topic with N partitions first if it does not exist",
    )


def register(sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``node`` and its actions."""
    node_sub = add_noun(sub, "node", "nodes known by their reports and leases")
    add_command(
        node_sub,
        "list",
        _cmd_node_list,
        reporting,
        "nodes: node lease, partitions owned, report age, entries, roles held",
    )
    forget = add_command(
        node_sub,
        "forget",
        _cmd_node_forget,
        reporting,
        "delete a gone node's report (refuses a live node; says whether M drops)",
    )
    forget.add_argument("node")


def _exit_now() -> NoReturn:
    """Leave with exit status 1 at once: a reconciler node whose loop
    stopped has said why (one line) and let go of its partitions; the hung
    loop's threads may never end, and a normal exit would wait for them.
    Its supervisor restarts it."""
    exit_at_once(EXIT_FAILED)


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
    emit(
        {"topic": args.topic, "partition": args.partition, "offsets": offsets, "verified": ok},
        args,
        f"{len(offsets)} records acknowledged at offsets {offsets[0]}..{offsets[-1]}; "
        f"read back {'identically' if ok else 'WITH DIFFERENCES'}",
    )
    return EXIT_OK if ok else EXIT_FAILED


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
    emit([dataclasses.asdict(r) for r in rows], args, "\n".join(lines))
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
    emit(data, args, human)
    return EXIT_OK
