"""The whole system at once, for trying and checking it: ``epochgc verify``
(randomized runs under injected faults), ``epochgc simulate`` (the same
code in one thread on virtual time, replayable from a seed) and ``epochgc
demo``. Each imports
what it runs inside the command: nothing else needs it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from epochgc.cli.arguments import LOG_LEVELS, add_command
from epochgc.cli.output import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, SubParsers
from epochgc.config import Config
from epochgc.config_examples import DEMO
from epochgc.extras import EMBEDDED, SIMULATE, SPARK, require
from epochgc.logging_setup import setup_logging
from epochgc.wiring.store import open_store


def register(
    sub: SubParsers, common: argparse.ArgumentParser, demo_common: argparse.ArgumentParser
) -> None:
    """``verify``, ``simulate`` and ``demo``."""
    verify = add_command(
        sub,
        "verify",
        _cmd_verify,
        common,
        "randomized end-to-end safety run under injected faults, then the checks",
    )
    verify.add_argument(
        "--seed", type=int, nargs="+", required=True, help="one or more seeds (one run each)"
    )
    verify.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    verify.add_argument("--spark", action="store_true", help="run a Spark GC job mid-way")
    verify.add_argument("--folder", help="keep each run's logs and records here")
    verify.add_argument(
        "--quiesce-timeout",
        type=float,
        default=90.0,
        help="seconds allowed after the faults stop for everything <= M to go",
    )
    verify.add_argument(
        "--stop-on-failure", action="store_true", help="stop at the first seed that fails"
    )
    verify.add_argument(
        "--unsafe-test-build",
        action="store_true",
        help="publish M(p) = max_applied_epoch - 1 (a broken build the checks must catch)",
    )
    verify.add_argument(
        "--worker-log-level",
        choices=LOG_LEVELS,
        default="WARNING",
        help="log level of the node and daemon processes (their logs are in --folder)",
    )
    simulate = add_command(
        sub,
        "simulate",
        _cmd_simulate,
        common,
        "deterministic simulation: the lease, ownership, partition log, reconciler and "
        "collector code of a whole cluster in one thread on virtual time, under faults; "
        "one seed replays a run",
    )
    which = simulate.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int, help="run (or replay) one seed, with its trace")
    which.add_argument("--seeds", type=seed_range, help="run many seeds on every core, e.g. 1-200")
    simulate.add_argument(
        "--virtual-seconds",
        type=float,
        default=600.0,
        help="virtual seconds of faults before the heal phase (default 600)",
    )
    simulate.add_argument(
        "--workers", type=int, help="processes for --seeds (default: one per core)"
    )
    simulate.add_argument(
        "--unsafe-test-build",
        action="store_true",
        help="nodes publish M(p) = max_applied_epoch - 1 (a broken build the invariants "
        "must catch)",
    )
    demo = add_command(
        sub,
        "demo",
        _cmd_demo,
        demo_common,
        "producers, reconcilers and the GC daemon on the embedded S3, then a check",
    )
    demo.add_argument(
        "--duration", type=float, default=60.0, help="seconds of workload (default: %(default)g)"
    )
    demo.set_defaults(default_config=DEMO)
    demo.add_argument("--seed", type=int, default=1, help="the workload's random seed")


def _cmd_verify(config: Config, args: argparse.Namespace) -> int:
    # Imported here: only this command runs the whole system under faults.
    import tempfile  # noqa: PLC0415

    from epochgc.verify.run import run_verify, summary  # noqa: PLC0415
    from epochgc.verify.run_folder import check_run_folder  # noqa: PLC0415
    from epochgc.wiring.interrupts import sigterm_as_interrupt  # noqa: PLC0415

    # Before the run, not when its embedded S3 starts or its Spark job half-way
    # through fails (a run without its Spark job would still pass).
    require("moto.server", EMBEDDED, "verify")
    if args.spark:
        require("pyspark", SPARK, "verify --spark")
    if args.log_level is None:
        setup_logging("WARNING")
    folders = {seed: Path(args.folder) / f"seed-{seed}" for seed in args.seed if args.folder}
    for seed_folder in folders.values():
        check_run_folder(seed_folder)  # before the first run, not after ten
    failed = []
    for seed in args.seed:
        folder = folders.get(seed)
        # A SIGTERM (``pkill``, a CI timeout) stops the workers as Ctrl-C does.
        with (
            sigterm_as_interrupt(),
            tempfile.TemporaryDirectory(prefix=f"epochgc-verify-{seed}-") as tmp,
        ):
            result = run_verify(
                seed,
                args.duration,
                folder or Path(tmp),
                spark=args.spark,
                unsafe_safe_epoch=args.unsafe_test_build,
                quiesce_timeout=args.quiesce_timeout,
                worker_log_level=args.worker_log_level,
            )
        print(summary(result), flush=True)
        if not result.ok:
            failed.append(seed)
            if args.stop_on_failure:
                break
    if len(args.seed) > 1:
        print(f"{len(failed)} of {len(args.seed)} seeds failed: {failed}")
    return EXIT_OK if not failed else EXIT_FAILED


def seed_range(text: str) -> range:
    """``N`` or ``FIRST-LAST`` (inclusive), for ``--seeds``."""
    first, _, last = text.partition("-")
    try:
        low = int(first)
        high = int(last) if last else low
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a seed range: {text!r} (e.g. 1-200)") from None
    if low < 0 or high < low:
        raise argparse.ArgumentTypeError(f"not a seed range: {text!r} (e.g. 1-200)")
    return range(low, high + 1)


def _cmd_simulate(config: Config, args: argparse.Namespace) -> int:
    require("greenlet", SIMULATE, "simulate")
    from epochgc.simulate.seeds import (  # noqa: PLC0415
        Progress,
        report_lines,
        run_seed,
        run_seeds,
        shrink,
    )

    if args.virtual_seconds < 60:
        print("epochgc: --virtual-seconds must be at least 60", file=sys.stderr)
        return EXIT_CONFIG
    if os.environ.get("PYTHONHASHSEED") != "0":
        # Sets of strings iterate in hash order: a replay needs the order
        # of the run it replays (every worker of --seeds runs with 0 too).
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        argv = [sys.executable, "-m", "epochgc.cli", *sys.argv[1:]]
        os.execve(sys.executable, argv, env)  # noqa: S606 - this very command, again
    if args.seed is not None:
        result = run_seed(args.seed, seconds=args.virtual_seconds, unsafe=args.unsafe_test_build)
        shrunk = None if result.ok else shrink(result, seconds=args.virtual_seconds)
        print("\n".join(report_lines(result, shrunk)))
        print(
            f"simulate: seed {result.seed}: {result.events:,} events, {result.requests:,} "
            f"requests, {result.chunks_applied:,} chunks applied, {result.l0_deleted:,} L0 "
            f"objects deleted, {result.virtual_seconds:.0f} virtual seconds, "
            f"trace {result.trace_hash}"
        )
        return EXIT_OK if result.ok else EXIT_FAILED
    seeds: range = args.seeds
    progress = Progress(len(seeds))
    failed = []
    done = 0
    for result in run_seeds(
        seeds, seconds=args.virtual_seconds, workers=args.workers, unsafe=args.unsafe_test_build
    ):
        done += 1
        if not result.ok:
            failed.append(result)
            print("\n".join(report_lines(result)), flush=True)
        line = progress.line(done, len(failed))
        if line is not None:
            print(line, flush=True)
    rate = progress.seeds_per_hour(done)
    if failed:
        print(f"failing seeds: {' '.join(str(r.seed) for r in failed)} (replay one with --seed)")
    print(f"simulate: {done} seeds, {len(failed)} violations, {rate:,.0f} seeds/hour")
    return EXIT_OK if not failed else EXIT_FAILED


def _cmd_demo(config: Config, args: argparse.Namespace) -> int:
    # Imported here: only this command needs the whole stack at once.
    from epochgc.demo import run_demo, summary_lines  # noqa: PLC0415

    if not config.store.embedded:
        print(
            "epochgc: the demo runs on the embedded S3 only: run it without --config "
            "(built-in demo settings), or set EPOCHGC_STORE__EMBEDDED=true",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if config.gc.min_object_age_seconds > args.duration / 4:
        print(
            f"epochgc: [gc] min_object_age_seconds={config.gc.min_object_age_seconds:g} is too "
            f"long for a {args.duration:g}s demo (nothing would age in): give --duration "
            f"{4 * config.gc.min_object_age_seconds:g} or more",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if args.log_level is None:
        setup_logging("WARNING")  # the live table is the output; warnings still show
    with open_store(config) as handle:
        result = asyncio.run(
            run_demo(config, handle, duration_seconds=args.duration, seed=args.seed)
        )
    print("\n".join(summary_lines(result)))
    return EXIT_OK if result.ok else EXIT_FAILED
