"""The ``epochgc`` command line.

Each sub-command loads and validates the configuration before doing any
work (a bad value exits 2 with file, key and reason), sets up logging once,
and exits non-zero on failure. Nothing imports this module.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence

from epochgc.config import Config, load_config, log_level_of
from epochgc.errors import ConfigError, EpochGCError
from epochgc.logging_setup import setup_logging
from epochgc.runtime import open_store
from epochgc.storage.probe import format_probe_table, run_probes

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
    parser = argparse.ArgumentParser(
        prog="epochgc",
        description="Epoch-watermark garbage collector for temporary L0 objects in S3.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = sub.add_parser(
        "check-store",
        parents=[common],
        help="probe the bucket for conditional writes, batch deletes and list order",
    )
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(handler=_cmd_check_store)

    config_cmd = sub.add_parser("config", help="configuration tools")
    config_sub = config_cmd.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    show = config_sub.add_parser(
        "show", parents=[common], help="print the effective configuration (secrets masked)"
    )
    show.set_defaults(handler=_cmd_config_show)
    return parser


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
