"""``epochgc partition show|compact|skip``: one partition's state machine;
``skip`` is the way past a stuck partition (docs/operating.md, "Stuck
partitions").
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from datetime import UTC, datetime

from epochgc.cli.arguments import add_command, add_noun, add_partition_arguments
from epochgc.cli.output import EXIT_OK, EXIT_REFUSED, SubParsers, emit, operator
from epochgc.config import Config
from epochgc.reconciler.records_lost import plan_records_lost, record_records_lost
from epochgc.storage.object_store import ObjectStore
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.wiring.store import open_store

log = logging.getLogger(__name__)

DEFAULT_SKIP_REASON = "L0 data missing or corrupt before reconciliation"


def register(sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``partition`` and its actions."""
    partition_sub = add_noun(sub, "partition", "partition state machines")
    for name, handler, text in (
        ("show", _cmd_partition_show, "replayed state, window and M(p) of a partition"),
        (
            "compact",
            _cmd_partition_compact,
            "snapshot a partition now and truncate its log below min(lro+1, retention hint)",
        ),
    ):
        add_partition_arguments(add_command(partition_sub, name, handler, reporting, text))
    skip = add_command(
        partition_sub,
        "skip",
        _cmd_partition_skip,
        reporting,
        "record records lro+1..OFFSET of a stuck partition as lost, so it moves on",
    )
    add_partition_arguments(skip)
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


def _open_replica(config: Config, store: ObjectStore, args: argparse.Namespace) -> PartitionReplica:
    topic = Controller(store, config.layout.root).topic(args.topic)
    replica = PartitionReplica(store, config.layout.root, topic.partition_id(args.partition))
    replica.open()
    return replica


def _cmd_partition_show(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, writes=False) as handle:
        replica = _open_replica(config, handle.store, args)
        state = replica.state
    data = dataclasses.asdict(state)
    data["safe_epoch"] = state.safe_epoch
    data["hole"] = replica.hole
    human = "\n".join(f"{key:28} {value}" for key, value in data.items())
    emit(data, args, f"{args.topic}/{args.partition}\n{human}")
    return EXIT_OK


def _cmd_partition_compact(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        replica = _open_replica(config, handle.store, args)
        snapshotted = replica.write_snapshot()
        truncated = replica.truncate()
    covered = replica.state.applied_log_offset
    emit(
        {"snapshot_written": snapshotted, "covered_offset": covered, "truncated": truncated},
        args,
        f"{args.topic}/{args.partition}: snapshot at log offset {covered} "
        f"({'written' if snapshotted else 'already current'}), {truncated} entries truncated",
    )
    return EXIT_OK


def _cmd_partition_skip(config: Config, args: argparse.Namespace) -> int:
    """Record records ``lro+1..--through`` of a partition as lost, so its
    reconciliation and ``M(p)`` move on. Shows the plan first; refuses
    (exit 2) without ``--accept-data-loss``."""
    by = operator()
    reason = args.reason or DEFAULT_SKIP_REASON
    now = datetime.now(UTC)
    with open_store(config) as handle:
        replica = _open_replica(config, handle.store, args)
        pid = replica.pid
        skip = plan_records_lost(handle.store, replica, args.through, by=by, reason=reason, now=now)
        command, present = skip.command, skip.l0_objects
        plan = {
            "topic": args.topic,
            "partition": args.partition,
            "revision": pid.revision,
            "first_offset": command.first,
            "last_offset": command.last,
            "records": skip.records,
            "placeholders": skip.placeholders,
            "l0_objects": [{"key": key, "present": present[key]} for key in present],
            "reason": reason,
            "by": by,
        }
        human = [
            f"{pid}: records {command.first}..{command.last} "
            f"({skip.records} records in {skip.placeholders} placeholders) are to be recorded "
            "as lost; L0 objects concerned:",
            *(f"  {key} ({'present' if present[key] else 'missing'})" for key in present),
        ]
        if all(present.values()):
            human.append(
                "  every object is present: is the partition stuck on a corrupt one, or is "
                "this the wrong range?"
            )
        if not args.accept_data_loss:
            emit({**plan, "recorded": False}, args, "\n".join(human))
            print(
                "epochgc: refusing: this records data loss for good; "
                "run again with --accept-data-loss",
                file=sys.stderr,
            )
            return EXIT_REFUSED
        entry = record_records_lost(replica, args.through, by=by, reason=reason, now=now)
        state = replica.state
    log.warning(
        "%s: records %d..%d recorded as lost by %s at log offset %d (%s); L0 objects: %s",
        pid,
        command.first,
        command.last,
        by,
        entry.offset,
        reason,
        ", ".join(present),
    )
    human.append(
        f"recorded at log offset {entry.offset}: lro {state.lro}, M(p) {state.safe_epoch}; "
        "the partition's leader takes a new term and moves on"
    )
    data = {
        **plan,
        "recorded": True,
        "log_offset": entry.offset,
        "lro": state.lro,
        "safe_epoch": state.safe_epoch,
    }
    emit(data, args, "\n".join(human))
    return EXIT_OK
