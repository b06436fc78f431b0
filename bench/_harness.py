"""Shared pieces of the benchmarks: an embedded S3 to measure against,
progress lines for long loops, and the closing verdict line.

Every benchmark runs its baseline and epochgc in the same process and run,
prints the ratio, and ends with exactly one line
``bench NAME: FIGURE (target TARGET) PASS|FAIL``; it exits 1 on FAIL.
Run them from the repository root as modules (``python -m bench.bench_x``).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence

from epochgc.progress import ProgressLog

log = logging.getLogger("epochgc.bench")


class Progress(ProgressLog):
    """``ProgressLog`` under the bench logger: ``done/total``, rate, ETA."""

    def __init__(self, label: str, total: int, every_seconds: float = 5.0) -> None:
        super().__init__(log, label, total, every_seconds=every_seconds)


def balanced(loads: Sequence[int], total: int) -> bool:
    """Every node within 10% of the fair share ``total / len(loads)``, or
    as close as whole partitions allow: the assignment gives each node the
    floor or the ceiling of the fair share, and at a small size (120
    partitions over 21 nodes: 5 or 6 against 5.71) one partition is more
    than 10%."""
    fair = total / len(loads)
    return max(loads) <= max(fair * 1.1, math.ceil(fair)) and min(loads) >= min(
        fair * 0.9, math.floor(fair)
    )


def figures(epochgc: str, baseline: str, ratio: str) -> None:
    """Print the line ``bench/run_all.py`` puts in its table."""
    doc = {"epochgc": epochgc, "baseline": baseline, "ratio": ratio}
    print(f"bench-figures {json.dumps(doc)}")


def verdict(name: str, figure: str, target: str, passed: bool) -> int:
    """Print the closing line; return the process exit code."""
    print(f"bench {name}: {figure} (target {target}) {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


def setup_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s"
    )
    # moto logs a traceback for every 500 it answers; the benchmarks count those.
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)


def inject_latency(client: object, seconds: float) -> None:
    """Delay every S3 request of ``client`` by ``seconds`` before it is
    sent, emulating a real S3 round trip against the local embedded server
    (a botocore hook: nothing about the request changes)."""

    def delay(**_kwargs: object) -> None:
        time.sleep(seconds)

    client.meta.events.register("before-send.s3", delay)  # type: ignore[attr-defined]
