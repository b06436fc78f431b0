"""The bucket and the configuration: ``epochgc check-store``, ``migrate``,
``config show``, ``embedded-s3`` and ``inventory build``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import threading
from pathlib import Path

from epochgc.cli.arguments import add_command, add_noun
from epochgc.cli.output import EXIT_FAILED, EXIT_OK, SubParsers, emit, exit_at_once
from epochgc.config import Config
from epochgc.config_examples import EXAMPLES, write_examples
from epochgc.extras import BASE, require
from epochgc.storage.bucket_settings import (
    Severity,
    assess_bucket_settings,
    format_findings,
    read_bucket_settings,
)
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.probe import format_probe_table, run_probes, wait_until_reachable
from epochgc.watermarks.layout import LAYOUT
from epochgc.watermarks.migrate import migrate_layout
from epochgc.wiring.store import open_store
from epochgc.wording import counted


def register(
    sub: SubParsers, common: argparse.ArgumentParser, reporting: argparse.ArgumentParser
) -> None:
    """``check-store``, ``migrate``, ``config`` and ``embedded-s3``."""
    check = add_command(
        sub,
        "check-store",
        _cmd_check_store,
        reporting,
        "probe the bucket for conditional writes, batch deletes and list order, and "
        "check the settings that defeat a collector (versioning, lifecycle, object lock)",
    )
    check.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for the store to answer (a server just started)",
    )
    add_command(
        sub,
        "migrate",
        _cmd_migrate,
        reporting,
        "rewrite a bucket written by an older epochgc (layout 1) to layout 2; "
        "stop every node and daemon first",
    )
    config_sub = add_noun(sub, "config", "configuration tools")
    add_command(
        config_sub,
        "show",
        _cmd_config_show,
        reporting,
        "print the effective configuration (secrets masked)",
    )
    example = add_command(
        config_sub,
        "example",
        _cmd_config_example,
        argparse.ArgumentParser(add_help=False),  # reads no configuration
        "write the example configurations (demo, quickstart, AWS, every default)",
    )
    example.add_argument(
        "out",
        nargs="?",
        default="epochgc-config",
        metavar="DIR",
        help="folder (default: epochgc-config)",
    )
    example.add_argument("--force", action="store_true", help="replace files already there")
    serve = add_command(
        sub,
        "embedded-s3",
        _cmd_embedded_s3,
        common,
        "serve an in-memory S3 (moto) for local runs until SIGTERM",
    )
    serve.set_defaults(long_running=True)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    serve.add_argument("--port", type=int, default=9000, help="port (0 picks a free one)")


def register_inventory(sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``inventory`` and its action."""
    inventory_sub = add_noun(sub, "inventory", "S3 Inventory reports")
    build = add_command(
        inventory_sub,
        "build",
        _cmd_inventory_build,
        reporting,
        "write an inventory report in AWS's format from a live listing",
    )
    build.add_argument("--format", choices=["csv", "parquet"], default="parquet")
    build.add_argument(
        "--prefix", help="what to inventory (default: the L0 prefix; '' for the whole bucket)"
    )
    build.add_argument("--rows-per-file", type=int, help="overrides [inventory] rows_per_file")


def _cmd_check_store(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, check_layout=False, writes=False) as handle:
        wait_until_reachable(handle.store, config.layout.root, args.wait)
        results = run_probes(
            handle.store,
            config.layout.root,
            detect_if_match_form=config.store.if_match_form == "auto",
        )
        settings = read_bucket_settings(handle.store, config.layout.root)
    findings = assess_bucket_settings(settings, config.layout.root)
    ok = all(r.passed for r in results) and all(f.severity is not Severity.ERROR for f in findings)
    emit(
        {
            "bucket": config.store.bucket,
            "ok": ok,
            "if_match_form": handle.store.if_match_form,
            "probes": [{"name": r.name, "passed": r.passed, "detail": r.detail} for r in results],
            "bucket_settings": [
                {"name": f.name, "severity": f.severity.value, "detail": f.detail} for f in findings
            ],
        },
        args,
        format_probe_table(results, config.store.bucket)
        + "\nbucket settings:\n"
        + format_findings(findings),
    )
    return EXIT_OK if ok else EXIT_FAILED


def _cmd_migrate(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, check_layout=False) as handle:
        report = migrate_layout(handle.store, config.layout.root)
    if report.already_current:
        human = f"root {config.layout.root!r} is already in layout {LAYOUT}: nothing to do"
    else:
        abandoned = "".join(f"\n  not migrated: {a}" for a in report.partitions_abandoned)
        human = (
            f"migrated {counted(len(report.partitions_migrated), 'partition')} to layout {LAYOUT}: "
            f"{report.objects_copied} objects copied, {report.objects_deleted} layout-1 "
            f"objects and {report.leases_deleted} partition leases deleted{abandoned}"
        )
    emit(dataclasses.asdict(report), args, human)
    return EXIT_OK


def _cmd_config_show(config: Config, args: argparse.Namespace) -> int:
    described = config.describe()
    # TOML-like for people (what they would write in a file), JSON for scripts.
    lines: list[str] = []
    for section, values in described.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
        lines.append("")
    emit(described, args, "\n".join(lines).rstrip())
    return EXIT_OK


def _cmd_config_example(_config: Config, args: argparse.Namespace) -> int:
    written = write_examples(Path(args.out), overwrite=args.force)
    print("\n".join(f"{p}  ({EXAMPLES[p.name]})" for p in written))
    return EXIT_OK


def _cmd_embedded_s3(config: Config, args: argparse.Namespace) -> int:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with EmbeddedS3(bucket=config.store.bucket, host=args.host, port=args.port) as server:
        print(f"embedded S3 serving bucket {config.store.bucket!r} at {server.endpoint_url}")
        print("stop with Ctrl-C or SIGTERM; everything stored is lost then", flush=True)
        stop.wait()
    # Tearing down the interpreter after moto took one to three seconds
    # after the server said it stopped; nothing it held is kept by design.
    exit_at_once(EXIT_OK)


def _cmd_inventory_build(config: Config, args: argparse.Namespace) -> int:
    require("pyarrow", BASE, "inventory build")
    from epochgc.storage.inventory import build_inventory, store_for_bucket  # noqa: PLC0415
    from epochgc.wiring.settings import inventory_location  # noqa: PLC0415

    location = inventory_location(config)
    prefix = config.layout.root + "/l0/" if args.prefix is None else args.prefix
    with open_store(config) as handle:
        source = store_for_bucket(handle.store, location.source_bucket)
        key = build_inventory(
            source,
            store_for_bucket(handle.store, location.bucket),
            location,
            source.list_objects(prefix),
            file_format="CSV" if args.format == "csv" else "Parquet",
            rows_per_file=args.rows_per_file or config.inventory.rows_per_file,
        )
    emit(
        {"manifest": key, "bucket": location.bucket},
        args,
        f"inventory of s3://{location.source_bucket}/{prefix} written: "
        f"s3://{location.bucket}/{key}",
    )
    return EXIT_OK
