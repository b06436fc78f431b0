"""``epochgc gc spark`` (the deletion job on Spark) and ``epochgc spark
package`` (what its executors need). Spark and pyarrow are an extra:
every import of them, or of a module that needs them, stays inside a
command, so the base install runs every other command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from epochgc.cli.arguments import add_command, add_noun
from epochgc.cli.output import EXIT_OK, SubParsers, emit, print_run
from epochgc.config import SPARK_LOG_LEVELS, Config
from epochgc.extras import BASE, SPARK, require
from epochgc.gc.control import DeletingJob
from epochgc.gc.pause import PauseGuard
from epochgc.wiring.store import open_store
from epochgc.wording import counted

if TYPE_CHECKING:
    from epochgc.gc.spark.package import SparkPackage
    from epochgc.gc.spark.phase_times import PhaseTimes


def add_gc_spark(gc_sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``gc spark``, an action of ``gc``."""
    spark = add_command(
        gc_sub,
        "spark",
        _cmd_gc_spark,
        reporting,
        "the deletion job on Spark: live listing or the newest S3 Inventory",
    )
    spark.add_argument("--mode", choices=["listing", "inventory"], default="listing")
    spark.add_argument(
        "--dry-run",
        action="store_true",
        help="delete nothing; write the plan (runs even while paused)",
    )
    spark.add_argument(
        "--force",
        action="store_true",
        help="bypass the delete-fraction guard ([gc] max_delete_fraction); nothing else",
    )
    spark.add_argument(
        "--max-epoch",
        type=int,
        metavar="N",
        help="use this M (at most the computed one, unless --allow-max-epoch-above-m)",
    )
    spark.add_argument(
        "--allow-max-epoch-above-m",
        action="store_true",
        help="accept a --max-epoch above the computed M (objects above M may still be "
        "needed: at your own risk); never above the cluster epoch",
    )
    spark.add_argument("--master", help="Spark master (default: [spark] master)")
    spark.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable; over [spark] conf; see `epochgc docs spark`)",
    )
    spark.add_argument(
        "--spark-log-level",
        choices=SPARK_LOG_LEVELS,
        help="Spark's own log level (default: [spark] log_level, WARN)",
    )


def register(sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``spark`` and its action."""
    shipping_sub = add_noun(sub, "spark", "what Spark executors need (`epochgc docs spark`)")
    package = add_command(
        shipping_sub,
        "package",
        _cmd_spark_package,
        reporting,
        "build the code zip (--py-files) and the packed environment (--archives)",
    )
    package.add_argument(
        "--out", metavar="DIR", help="output folder (default: [spark] package_dir)"
    )
    package.add_argument(
        "--rebuild-environment",
        action="store_true",
        help="build the environment archive again even if it is up to date (the shared "
        "cached one: other package folders get the new one when next packaged or shipped)",
    )
    package.add_argument(
        "--master", help="the master the printed spark-submit line names (default: [spark] master)"
    )


def _cmd_gc_spark(config: Config, args: argparse.Namespace) -> int:
    # Imported here: only these commands need Spark (an extra).
    require("pyspark", SPARK, "gc spark")
    require("pyarrow", BASE, "gc spark")
    from epochgc.gc.spark.session import ships_package  # noqa: PLC0415

    master = args.master or config.spark.master
    if ships_package(master, ship=config.spark.ship):
        # It may have to build the executors' environment, after the probes.
        require("venv_pack", SPARK, f"gc spark on {master}")
    from epochgc.gc.spark.conf import merged_conf, parse_conf_args  # noqa: PLC0415
    from epochgc.gc.spark.job import SparkRunOptions, run_spark_gc  # noqa: PLC0415
    from epochgc.gc.spark.phase_times import PhaseTimes  # noqa: PLC0415
    from epochgc.gc.spark.session import build_spark_session  # noqa: PLC0415
    from epochgc.wiring.settings import spark_gc_settings_of  # noqa: PLC0415

    times = PhaseTimes()
    spark_conf = merged_conf(config.spark.conf, parse_conf_args(args.conf))
    options = SparkRunOptions(
        mode=args.mode,
        dry_run=args.dry_run,
        force=args.force,
        max_epoch=args.max_epoch,
        allow_above_m=args.allow_max_epoch_above_m,
        listing_tasks=config.spark.listing_tasks,
    )
    with open_store(config) as handle:
        if not args.dry_run:
            # Refuse before starting Spark (the driver checks again itself).
            PauseGuard(handle.store, config.layout.root).check(DeletingJob.L0)
        package = _package_step(config, master, times)
        with times.phase("spark_start"):
            spark = build_spark_session(
                master,
                conf=spark_conf,
                package=package,
                log_level=args.spark_log_level or config.spark.log_level,
            )
        try:
            outcome = run_spark_gc(
                spark,
                spark_gc_settings_of(config),
                handle.store,
                handle.stats,
                handle.client_settings,
                options,
                times=times,
            )
        finally:
            with times.phase("spark_stop"):
                spark.stop()
    s = outcome.summary
    return print_run(
        s,
        args,
        {
            "summary_key": outcome.summary_key,
            "plan_prefix": outcome.plan_prefix,
            "manifest": outcome.manifest_key,
            "tasks": outcome.tasks,
            "environment": package.environment_step.value
            if package and package.environment_step
            else None,
            "seconds": times.as_json(),
        },
        plan=f"{outcome.plan_prefix}part-*.parquet" if outcome.plan_prefix else None,
        stopped=outcome.stopped_by_guard,
        listed_up_to_m=options.mode == "listing"
        and (args.force or config.gc.max_delete_fraction >= 1.0),
        details=f", {counted(outcome.tasks, 'task')}"
        + (f", inventory {outcome.manifest_key}" if outcome.manifest_key else ""),
        timing=times.line(),
    )


def _package_step(config: Config, master: str, times: PhaseTimes) -> SparkPackage | None:
    """The executors' package when this run ships one (``package_to_ship``),
    timed as the ``package`` phase with how the environment came to be
    current (built, or reused: the build is what takes long)."""
    from epochgc.gc.spark.session import package_to_ship, ships_package  # noqa: PLC0415

    if not ships_package(master, ship=config.spark.ship):
        return None
    with times.phase("package"):
        package = package_to_ship(
            master, ship=config.spark.ship, package_dir=config.spark.package_dir
        )
    if package is not None and package.environment_step is not None:
        times.note("package", f"environment {package.environment_step.value}")
    return package


def _cmd_spark_package(config: Config, args: argparse.Namespace) -> int:
    require("pyspark", SPARK, "spark package")
    from epochgc.gc.spark.package import (  # noqa: PLC0415
        EXECUTOR_PYTHON,
        default_package_dir,
        ensure_package,
        is_local_master,
    )

    out = Path(args.out or config.spark.package_dir or default_package_dir()).absolute()
    package = ensure_package(out, rebuild_environment=args.rebuild_environment)
    step = package.environment_step.value if package.environment_step else "up to date"
    config_file = str(Path(args.config).absolute()) if args.config else "FILE"
    master = args.master or config.spark.master
    command = package.submit_command(master, sys.executable, config_file)
    how = (
        f"local master {master}: Spark's workers run this Python ({sys.executable}), "
        "so no packed environment is shipped (the files are for a cluster master)"
        if is_local_master(master)
        else "run the job (client mode; add gc spark's options, e.g. --mode inventory):"
    )
    emit(
        {
            "code_zip": str(package.code_zip),
            "environment": str(package.environment),
            "environment_step": step,
            "entry_script": str(package.entry_script),
            "archives": package.archives_entry,
            "executor_python": EXECUTOR_PYTHON,
            "spark_submit_flags": shlex.join(package.submit_flags(sys.executable)),
            "spark_submit": shlex.join(command),
        },
        args,
        f"executors' package in {out}:\n  {package.code_zip.name} (epochgc, for --py-files)\n"
        f"  {package.environment.name} (boto3 + pyarrow, for --archives; {step})\n"
        f"  {package.entry_script.name} (what spark-submit runs)\n"
        f"{how}\n{shlex.join(command)}",
    )
    return EXIT_OK
