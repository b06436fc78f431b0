"""``epochgc controller compact``: the controller log's snapshot and truncation."""

from __future__ import annotations

import argparse
import dataclasses

from epochgc.cli.arguments import add_command, add_noun
from epochgc.cli.output import EXIT_OK, SubParsers, emit
from epochgc.config import Config
from epochgc.watermarks.controller import Controller
from epochgc.wiring.store import open_store


def register(sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``controller`` and its action."""
    controller_sub = add_noun(sub, "controller", "the controller log")
    compact = add_command(
        controller_sub,
        "compact",
        _cmd_controller_compact,
        reporting,
        "snapshot the controller log now and delete the entries the snapshot covers "
        "(never the newest)",
    )
    compact.add_argument(
        "--min-entries",
        type=int,
        default=1,
        metavar="N",
        help="do nothing while fewer than N entries are above the snapshot (default 1)",
    )


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
    emit({**dataclasses.asdict(result), "requests": requests}, args, human)
    return EXIT_OK
