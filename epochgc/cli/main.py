"""The ``epochgc`` command line: the parser and the entry point.

Each sub-command loads and validates the configuration before doing any
work (a bad value exits 2 with file, key and reason), sets up logging once,
and exits non-zero on failure; an ``EpochGCError`` that ends a command is
one bare line on stderr (``fatal_line``), not a log record.
The commands themselves are in one module per noun, each with its
``register``. Nothing imports this module but the entry points.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import epochgc
from epochgc.cli import (
    controller_commands,
    docs_commands,
    epoch_commands,
    gc_commands,
    node_commands,
    partition_commands,
    spark_commands,
    store_commands,
    tool_commands,
    topic_commands,
)
from epochgc.cli.arguments import LOG_LEVELS
from epochgc.cli.output import EXIT_CONFIG, EXIT_FAILED, Command
from epochgc.config import load_config, log_level_of
from epochgc.config_examples import example_path
from epochgc.errors import ConfigError, EpochGCError, StoreCapabilityError
from epochgc.logging_setup import setup_logging

log = logging.getLogger(__name__)


CONFIG_HELP = "TOML configuration (default: built-in defaults + EPOCHGC_* environment)"
COMMON_OPTIONS = ("config", "log_level", "verbose", "json")
"""The options a command takes after its name, and ``epochgc`` before it
(``epochgc --config FILE gc status``), as ``global_NAME``."""


def _add_common(parser: argparse.ArgumentParser, config_help: str, *, prefix: str = "") -> None:
    """``--config``, ``--log-level`` and ``-v`` (their ``dest`` prefixed)."""
    parser.add_argument("--config", dest=f"{prefix}config", metavar="FILE", help=config_help)
    parser.add_argument(
        "--log-level",
        dest=f"{prefix}log_level",
        choices=LOG_LEVELS,
        help="overrides [logging] level",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        dest=f"{prefix}verbose",
        action="store_true",
        help="a one-shot command logs at INFO (it shows only warnings and progress by default)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and documentation)."""
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, CONFIG_HELP)
    reporting = argparse.ArgumentParser(add_help=False, parents=[common])
    reporting.add_argument("--json", action="store_true", help="machine-readable output")
    demo_common = argparse.ArgumentParser(add_help=False)
    _add_common(demo_common, "TOML configuration (default: the demo settings, config/local.toml)")
    parser = argparse.ArgumentParser(
        prog="epochgc",
        description="Epoch-watermark garbage collector for temporary L0 objects in S3.",
        epilog="--config, --log-level, -v and --json may also come after COMMAND.",
    )
    parser.add_argument("--version", action="version", version=f"epochgc {epochgc.__version__}")
    _add_common(parser, CONFIG_HELP, prefix="global_")
    parser.add_argument(
        "--json", dest="global_json", action="store_true", help="machine-readable output"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # In the order `epochgc --help` lists them.
    store_commands.register(sub, common, reporting)
    node_commands.register_runners(sub, common, reporting)
    store_commands.register_inventory(sub, reporting)
    tool_commands.register(sub, common, demo_common)
    node_commands.register(sub, reporting)
    topic_commands.register(sub, reporting)
    epoch_commands.register(sub, reporting)
    controller_commands.register(sub, reporting)
    partition_commands.register(sub, reporting)
    gc_commands.register(sub, reporting)
    spark_commands.register(sub, reporting)
    gc_commands.register_daemon(sub, common)
    docs_commands.register(sub)
    return parser


def fatal_line(err: EpochGCError) -> str:
    """The one line a command ends with on ``err``, as the README shows it:
    a person reads it, so no timestamp, logger or class name (the messages
    name the cause and what to do); a configuration value found unusable
    while running (a metrics port in use) reads like one found at load."""
    if isinstance(err, ConfigError):
        return f"epochgc: configuration error: {err}"
    return f"epochgc: {err}"


def _take_common_options(args: argparse.Namespace, command: argparse.ArgumentParser) -> None:
    """Move the common options given before the command onto it: a command
    that does not take one, or one given on both sides, is a usage error."""
    for name in COMMON_OPTIONS:
        given = getattr(args, f"global_{name}", None)
        if not given:
            continue
        option = "--" + name.replace("_", "-")
        if not hasattr(args, name):
            command.error(f"{option} means nothing to this command")
        if getattr(args, name):
            command.error(f"{option} given both before and after the command")
        setattr(args, name, given)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``epochgc`` console script."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    command_parser: argparse.ArgumentParser = getattr(args, "command_parser", parser)
    if unknown:  # with the command's own usage, not the top level's
        command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    _take_common_options(args, command_parser)
    # A command may run on a shipped example when no --config is given
    # (``epochgc demo``: its demo timings, from any folder).
    default = getattr(args, "default_config", None)
    try:
        config = load_config(
            getattr(args, "config", None) or (example_path(default) if default else None)
        )
    except ConfigError as err:
        print(fatal_line(err), file=sys.stderr)
        return EXIT_CONFIG
    explicit = (
        getattr(args, "log_level", None)
        or config.logging.level
        or ("INFO" if getattr(args, "verbose", False) else "")
    )
    quiet = not explicit and not getattr(args, "long_running", False)
    setup_logging(explicit or log_level_of(config), quiet=quiet)
    handler: Command = args.handler
    try:
        return handler(config, args)
    except EpochGCError as err:
        # The traceback (the botocore cause) for whoever runs at DEBUG.
        log.debug("%s ended the command", type(err).__name__, exc_info=True)
        print(fatal_line(err), file=sys.stderr)
        if isinstance(err, StoreCapabilityError) and err.table:
            print(err.table, file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        log.warning("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
