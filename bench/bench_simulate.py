"""How many seeds an hour ``epochgc simulate`` checks on this machine,
against ``epochgc verify`` (the same kind of randomized run with real
processes, the embedded S3 and real time) as the baseline.

Scenario: the simulation's default (3 to 5 nodes, 2 topics, 600 virtual
seconds of faults and the heal phase), ``--seeds`` of them on every core;
the baseline is one ``epochgc verify`` seed of ``--verify-seconds`` seconds
of faults (its set-up and checks included), as ``make soak`` runs them.

Target (issue 39): at least 1,000 seeds per hour on 2 cores.

Run: ``python -m bench.bench_simulate [--seeds 1-200] [--verify-seconds 30]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from bench._harness import figures, verdict
from epochgc.simulate.seeds import run_seeds

TARGET_SEEDS_PER_HOUR = 1_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-200", help="seed range (default 1-200)")
    parser.add_argument("--verify-seconds", type=float, default=30.0)
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()
    first, _, last = args.seeds.partition("-")
    seeds = range(int(first), int(last or first) + 1)
    cores = os.cpu_count() or 1

    started = time.monotonic()
    results = list(run_seeds(seeds))
    sim_seconds = time.monotonic() - started
    violations = [r.seed for r in results if not r.ok]
    per_hour = len(results) / sim_seconds * 3600
    events = sum(r.events for r in results)
    requests = sum(r.requests for r in results)
    virtual = sum(r.virtual_seconds for r in results)
    print(
        f"simulate: {len(results)} seeds on {cores} cores in {sim_seconds:.1f}s: "
        f"{per_hour:,.0f} seeds/hour; {events:,} trace events, {requests:,} simulated "
        f"requests, {virtual / 3600:,.1f} virtual hours ({virtual / sim_seconds:,.0f}x real "
        f"time); violations: {violations or 'none'}"
    )

    baseline = "-"
    ratio = "-"
    if not args.skip_baseline:
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "epochgc.cli",
                "verify",
                "--seed",
                "1",
                "--duration",
                f"{args.verify_seconds:g}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        verify_seconds = time.monotonic() - started
        verify_per_hour = 3600 / verify_seconds
        print(
            f"verify (baseline): 1 seed of {args.verify_seconds:g}s faults in "
            f"{verify_seconds:.1f}s: {verify_per_hour:,.0f} seeds/hour "
            f"(exit {done.returncode})"
        )
        baseline = f"{verify_per_hour:,.0f} seeds/hour"
        ratio = f"{per_hour / verify_per_hour:,.0f}x"
        print(f"ratio: {ratio}")
    figures(f"{per_hour:,.0f} seeds/hour", baseline, ratio)
    passed = per_hour >= TARGET_SEEDS_PER_HOUR and not violations
    return verdict(
        "simulate",
        f"{per_hour:,.0f} seeds/hour on {cores} cores, {len(violations)} violations",
        f">= {TARGET_SEEDS_PER_HOUR:,} seeds/hour, 0 violations",
        passed,
    )


if __name__ == "__main__":
    sys.exit(main())
