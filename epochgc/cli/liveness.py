"""Two operator commands: ``epochgc partition skip`` (docs/operating.md,
"Stuck partitions") and ``epochgc gc explain`` (docs/operating.md, "Why is
this object still there? gc explain"). Kept out of
``cli.py`` (which only registers them) so each stays one small job.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import socket
import sys
from datetime import UTC, datetime

from epochgc.config import Config
from epochgc.gc.explain import explain, explanation_view, read_explain_inputs
from epochgc.reconciler.records_lost import plan_records_lost, record_records_lost
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.partition.replica import PartitionReplica
from epochgc.wiring.settings import collect_settings_of
from epochgc.wiring.store import open_store

log = logging.getLogger("epochgc.cli")

EXIT_OK = 0
EXIT_REFUSED = 2
DEFAULT_SKIP_REASON = "L0 data missing or corrupt before reconciliation"


def operator() -> str:
    """Who ran the command, for the record."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


def _emit(data: object, args: argparse.Namespace, human: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else human)


def cmd_partition_skip(config: Config, args: argparse.Namespace) -> int:
    """Record records ``lro+1..--through`` of a partition as lost, so its
    reconciliation and ``M(p)`` move on. Shows the plan first; refuses
    (exit 2) without ``--accept-data-loss``."""
    root = config.layout.root
    by = operator()
    reason = args.reason or DEFAULT_SKIP_REASON
    now = datetime.now(UTC)
    with open_store(config) as handle:
        pid = Controller(handle.store, root).topic(args.topic).partition_id(args.partition)
        replica = PartitionReplica(handle.store, root, pid)
        replica.open()
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
            _emit({**plan, "recorded": False}, args, "\n".join(human))
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
    _emit(data, args, "\n".join(human))
    return EXIT_OK


def cmd_gc_explain(config: Config, args: argparse.Namespace) -> int:
    """Say whether one object is deletable now and why. Exit 0 whatever the
    verdict (it is a question); 1 only when the inputs cannot be read."""
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
    _emit(data, args, "\n".join(lines))
    return EXIT_OK
