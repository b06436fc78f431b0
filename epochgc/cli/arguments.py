"""How a command module declares its commands: a noun and where its actions
go (``add_noun``), a command bound to its handler (``add_command``), and the
arguments several commands share. ``main`` builds the two parents every
command takes one of: ``common`` (``--config``, ``--log-level``) and
``reporting`` (those and ``--json``).
"""

from __future__ import annotations

import argparse

from epochgc.cli.output import Command, SubParsers

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
"""The levels ``--log-level`` (and ``verify --worker-log-level``) accept."""


def add_noun(sub: SubParsers, name: str, summary: str) -> SubParsers:
    """``epochgc NAME ACTION``: the noun's parser, returning where its
    actions are added (an action is required)."""
    noun = sub.add_parser(name, help=summary)
    return noun.add_subparsers(dest=f"{name}_command", required=True, metavar="ACTION")


def add_command(
    sub: SubParsers,
    name: str,
    handler: Command,
    parent: argparse.ArgumentParser,
    summary: str,
) -> argparse.ArgumentParser:
    """A command (or a noun's action) that runs ``handler``, taking
    ``parent``'s options; returns its parser for its own arguments."""
    parser = sub.add_parser(name, parents=[parent], help=summary)
    parser.set_defaults(handler=handler, command_parser=parser)
    return parser


def add_partition_arguments(parser: argparse.ArgumentParser) -> None:
    """The positional ``topic`` and ``partition`` of a command about one
    partition."""
    parser.add_argument("topic")
    parser.add_argument("partition", type=int)


def add_process_options(parser: argparse.ArgumentParser, section: str, runs: str) -> None:
    """``--node-id`` (over ``[section] node_id``) and ``--duration`` of a
    long-running process; ``runs`` says how long it runs without one."""
    parser.set_defaults(long_running=True)
    parser.add_argument("--node-id", help=f"overrides [{section}] node_id")
    parser.add_argument(
        "--duration", type=float, help=f"stop after this many seconds (default: {runs})"
    )
