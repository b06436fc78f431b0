"""``epochgc epoch show|tick|advance``: the cluster epoch."""

from __future__ import annotations

import argparse
import logging

from epochgc.cli.arguments import add_command, add_noun
from epochgc.cli.output import EXIT_OK, SubParsers, emit
from epochgc.config import Config
from epochgc.events import EventChannel
from epochgc.logging_setup import SHOWN
from epochgc.progress import ProgressLog
from epochgc.watermarks.controller import Controller, EpochAdvanceStarted, EpochTicked
from epochgc.wiring.store import open_store

log = logging.getLogger(__name__)


def register(sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``epoch`` and its actions."""
    epoch_sub = add_noun(sub, "epoch", "the cluster epoch")
    add_command(epoch_sub, "show", _cmd_epoch_show, reporting, "current epoch")
    add_command(epoch_sub, "tick", _cmd_epoch_tick, reporting, "append one epoch_tick now")
    advance = add_command(
        epoch_sub,
        "advance",
        _cmd_epoch_advance,
        reporting,
        "tick until the epoch reaches --to (refuses a value not above the current one)",
    )
    advance.add_argument("--to", type=int, required=True, metavar="EPOCH")


def _cmd_epoch_show(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, writes=False) as handle:
        epoch = Controller(handle.store, config.layout.root).current_epoch()
    emit({"cluster_epoch": epoch}, args, f"cluster epoch: {epoch}")
    return EXIT_OK


def _cmd_epoch_tick(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        epoch = Controller(handle.store, config.layout.root).tick()
    emit({"cluster_epoch": epoch}, args, f"cluster epoch is now {epoch}")
    return EXIT_OK


def _cmd_epoch_advance(config: Config, args: argparse.Namespace) -> int:
    target: int = args.to
    progress: list[ProgressLog] = []

    def started(event: EpochAdvanceStarted) -> None:
        # Each tick is one request: a long advance takes seconds, so say
        # what is happening before the first one and then every few seconds.
        steps = event.target - event.current
        log.info(
            "advancing the cluster epoch from %d to %d (%d ticks, one controller-log object each)",
            event.current,
            event.target,
            steps,
            extra=SHOWN,
        )
        progress.append(ProgressLog(log, "epoch advance", steps, unit="ticks"))

    events = EventChannel()
    events.subscribe(EpochAdvanceStarted, started)
    events.subscribe(EpochTicked, lambda _event: progress[0].advance())
    with open_store(config) as handle:
        epoch = Controller(handle.store, config.layout.root).advance_to(target, events=events)
    emit({"cluster_epoch": epoch}, args, f"cluster epoch is now {epoch}")
    return EXIT_OK
