"""The desired ownership assignment at scale: version 2 (a hash ring with
bounded loads) against version 1 (rendezvous hashing), in one run.

For each size it measures the CPU seconds of one assignment (what every node
spends on every membership change), the balance (largest minus smallest
load), and the partitions moved by a leave of one node, a join of one, a
leave of ten and a join of ten, each against the minimum (the leavers'
partitions, or the joiners' shares). Version 1 is O(partitions x nodes), so
it runs at the sizes it can finish in seconds; its time at 100,000 x 1,000 is
extrapolated from them (per partition x node), and said so.

Target (issue 28): at most 1 CPU second per assignment at 100,000 partitions
and 1,000 nodes, exactly balanced (loads differ by at most one).

Run from the repository root: ``python -m bench.bench_assignment``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from bench._harness import figures, verdict
from epochgc.ownership.assignment import desired_assignment
from epochgc.storage.keys import PartitionId

TARGET_CPU_SECONDS = 1.0


def _pids(count: int) -> list[PartitionId]:
    """Partitions spread over topics of 100 the way a cluster has them."""
    return [PartitionId(f"topic-{i // 100:04d}", 1, i % 100) for i in range(count)]


def _nodes(count: int, prefix: str = "node") -> list[str]:
    return [f"{prefix}-{i:04d}" for i in range(count)]


def _moved(before: dict[PartitionId, str], after: dict[PartitionId, str]) -> int:
    return sum(1 for pid, node in before.items() if after.get(pid) != node)


def measure(partitions: int, nodes: int, version: int) -> dict[str, float]:
    """CPU of one assignment, its balance, and moves per change / minimum."""
    pids, names = _pids(partitions), _nodes(nodes)
    started = time.process_time()
    base = desired_assignment(names, pids, version)
    cpu = time.process_time() - started
    loads = Counter(base.values())
    out = {"cpu": cpu, "spread": max(loads.values()) - min(loads.values())}
    joiners = _nodes(10, "new")
    changes = {
        "leave 1": (names[1:], loads[names[0]]),
        "join 1": ([*names, joiners[0]], partitions // (nodes + 1)),
        "leave 10": (names[10:], sum(loads[n] for n in names[:10])),
        "join 10": ([*names, *joiners], 10 * partitions // (nodes + 10)),
    }
    for label, (after_nodes, minimum) in changes.items():
        out[label] = _moved(base, desired_assignment(after_nodes, pids, version)) / minimum
    return out


def _row(label: str, m: dict[str, float]) -> str:
    moves = "  ".join(f"{k} {m[k]:.2f}x" for k in ("leave 1", "join 1", "leave 10", "join 10"))
    return f"{label:<28} cpu {m['cpu']:7.3f}s  spread {m['spread']:.0f}  moves/min: {moves}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    args = parser.parse_args()
    v1_sizes = [(10_000, 100), (20_000, 200)]
    v1 = {size: measure(*size, version=1) for size in v1_sizes}
    for (p, n), m in v1.items():
        print(_row(f"v1 {p:,} x {n:,}", m))
    per_cell = max(m["cpu"] / (p * n) for (p, n), m in v1.items())
    v1_big = per_cell * args.partitions * args.nodes
    print(f"v1 {args.partitions:,} x {args.nodes:,}: about {v1_big:.0f}s (extrapolated)")
    ours = {}
    for size in [*v1_sizes, (args.partitions, args.nodes)]:
        ours[size] = measure(*size, version=2)
        print(_row(f"v2 {size[0]:,} x {size[1]:,}", ours[size]))
    big = ours[(args.partitions, args.nodes)]
    figures(f"{big['cpu']:.2f}s", f"~{v1_big:.0f}s (v1)", f"{v1_big / big['cpu']:.0f}x")
    return verdict(
        "assignment",
        f"{big['cpu']:.2f} CPU s per assignment at {args.partitions:,} x {args.nodes:,} "
        f"({v1_big / big['cpu']:.0f}x less than v1's ~{v1_big:.0f}s), loads spread "
        f"{big['spread']:.0f}, moves per change {big['leave 1']:.1f}x the minimum for one "
        f"node and {big['leave 10']:.1f}x for ten",
        f"<= {TARGET_CPU_SECONDS:.0f} CPU s, spread <= 1",
        big["cpu"] <= TARGET_CPU_SECONDS and big["spread"] <= 1,
    )


if __name__ == "__main__":
    sys.exit(main())
