"""What every command module shares: exit statuses, printing a result as
JSON (``--json``) or as lines for people, who ran a command, and a run
summary's line (``gc collect`` and ``gc spark`` print the same).

A command prints its result once, through ``emit``; errors go to stderr
(``main`` logs an ``EpochGCError`` in one line).
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import socket
import sys
from collections.abc import Callable, Mapping
from typing import NoReturn, TypeAlias

from epochgc.config import Config
from epochgc.gc.run_report import RunSummary, encode_summary, unparseable_note

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
"""A configuration that does not load, or does not fit the command."""
EXIT_REFUSED = 2
"""A command that records data loss refused to without its explicit flag."""

Command = Callable[[Config, argparse.Namespace], int]
"""A command: the configuration and the parsed arguments in, the exit status out."""
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""Where a command module registers its commands (``register``)."""


def emit(data: object, args: argparse.Namespace, human: str) -> None:
    """Print a command's result: ``data`` as JSON with ``--json``, else ``human``."""
    print(json.dumps(data, indent=2, default=str) if args.json else human)


def operator() -> str:
    """Who ran the command, for the record: ``user@host``."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


def exit_at_once(status: int) -> NoReturn:
    """End the process now with ``status``, its logs and output flushed,
    without the interpreter's teardown: for a process whose threads may
    never end (a reconciler whose loop hung) or whose teardown is all cost
    (the embedded S3's moto, one to three seconds, with nothing to keep)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def dollars(value: object) -> str:
    """A modelled cost for a table: ``-`` when there is none."""
    return f"{value:.6f}" if isinstance(value, float | int) else "-"


def _skipped(skipped: Mapping[str, int]) -> str:
    """``3 too young, 1 unparseable`` (the reasons with a count), or ``none``."""
    named = [f"{n} {reason.replace('_', ' ')}" for reason, n in skipped.items() if n]
    return ", ".join(named) or "none"


def print_run(
    s: RunSummary,
    args: argparse.Namespace,
    extra: dict[str, object],
    *,
    plan: str | None = None,
    stopped: str | None = None,
    details: str = "",
    listed_up_to_m: bool = False,
    timing: str = "",
) -> int:
    """A run summary as a table line (or JSON); exit 0 only if it succeeded.

    ``listed_up_to_m``: each shard's listing stopped at its first key above
    ``M`` (the guard off or forced), so ``listed`` is not every L0 object
    there; the line says so. ``timing``: a last line saying where the
    run's time went."""
    up_to = " (each shard up to its first key above M)" if listed_up_to_m else ""
    human = (
        f"run {s.run_id} ({s.engine}{', dry run' if s.dry_run else ''}{details}): "
        f"M={s.safe_epoch} (controller offset {s.controller_offset}); listed {s.listed}{up_to}, "
        f"eligible {s.eligible}, deleted {s.deleted} ({s.bytes_deleted} bytes), "
        f"errors {s.errors}; skipped: {_skipped(s.skipped)}"
    )
    if s.shards is not None:
        human += f"\nshards: {s.shards.describe()}"
    never_deleted = unparseable_note(s)
    if never_deleted is not None:
        human += f"\nunparseable: {never_deleted}"
    if plan:
        human += f"\nplan: {plan}"
    if stopped:
        human += f"\nSTOPPED: {stopped}"
    if timing:
        human += f"\n{timing}"
    emit({**json.loads(encode_summary(s)), **extra, "stopped": stopped}, args, human)
    return EXIT_OK if s.success else EXIT_FAILED
