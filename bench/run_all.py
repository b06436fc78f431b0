"""Run every benchmark in ``bench/`` and print one table: benchmark,
epochgc's figure, the baseline's, the ratio, the target, pass or fail.

Each benchmark runs as its own process (``python -m bench.NAME``), one after
the other so they never share the machine; its full output goes to
``bench/results/NAME.log``. Exits 1 if any benchmark missed a target or
failed to run.

Run from the repository root: ``python -m bench.run_all [NAME ...]``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCHES = (
    "bench_delete",
    "bench_fence",
    "bench_pipeline",
    "bench_sweep",
    "bench_inventory",
    "bench_inventory_memory",
    "bench_startup",
    "bench_ownership",
    "bench_assignment",
    "bench_steady",
    "bench_list_parse",
    "bench_simulate",
)
VERDICT = re.compile(r"^bench (\S+): (.*) \(target (.*)\) (PASS|FAIL)$")
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Row:
    name: str
    epochgc: str = "-"
    baseline: str = "-"
    ratio: str = "-"
    target: str = "-"
    status: str = "ERROR"
    seconds: float = 0.0


def run(name: str) -> Row:
    row = Row(name)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}"], capture_output=True, text=True, check=False
    )
    row.seconds = time.monotonic() - started
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.log").write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    for line in done.stdout.splitlines():
        if line.startswith("bench-figures "):
            doc = json.loads(line.removeprefix("bench-figures "))
            row.epochgc, row.baseline, row.ratio = doc["epochgc"], doc["baseline"], doc["ratio"]
        elif match := VERDICT.match(line):
            row.target, row.status = match.group(3), match.group(4)
    if row.status == "ERROR":
        row.target = f"exit {done.returncode}, see bench/results/{name}.log"
    return row


def table(rows: list[Row]) -> str:
    headers = ("benchmark", "epochgc", "baseline", "ratio", "target", "result")
    cells = [headers] + [
        (r.name, r.epochgc, r.baseline, r.ratio, r.target, f"{r.status} ({r.seconds:.0f}s)")
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(headers))]
    lines = [
        " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", choices=[[], *BENCHES], help="default: all")
    args = parser.parse_args()
    rows = []
    for name in args.names or BENCHES:
        print(f"running {name} ...", flush=True)
        rows.append(run(name))
        print(f"  {rows[-1].status} in {rows[-1].seconds:.0f}s", flush=True)
    print(table(rows))
    return 0 if all(r.status == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
