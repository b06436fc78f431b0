"""The shard sweeper against the store's own ceiling and against the tools a
user would pick instead, side by side on the embedded S3.

Set-up. One embedded S3 (moto, served from this process) and, in front of
it, the latency proxy (``bench/latency_proxy.py``, a process of its own)
adding 20 ms to every request, about a real S3 round trip. Every contender
is a process of its own talking to the proxy, so they all see the same
latency, none shares this process's interpreter lock with the server, and
the proxy counts every request each one makes. Each contender gets a fresh
bucket with the same keys (seeded through the in-process backend; nothing
measured bypasses HTTP) and must delete exactly the keys of epochs
``<= M``: that is checked after each one, and any ineligible key deleted
is reported.

Data: 50,000 L0 objects over 4 shards and 100 epochs (0..99), ``M = 80``:
about 40,500 eligible, about 10,100 per shard. Why 4 shards of 12,500:

* Requests. S3 returns at most 1000 keys a page and a shard sweep must see
  the first key above ``M`` to stop, so a shard of ``e`` eligible keys
  costs ``floor(e / 1000) + 1`` LIST pages, and deleting costs one
  DeleteObjects per 1000: per 1000 deleted that is ``2 + (fraction of the
  last page wasted) * 1000 / e``, which stays under 2.1 only from about
  10,000 eligible keys a listed shard. That is the operating point the
  collector aims for (issue 19: a shard is listed when it may hold
  enough eligible objects to pay for the LIST); with fewer keys a shard
  no per-shard sweep can reach 2.1 (the previous 16 shards of 2,530
  eligible needed 3 pages each: 16 x 3 + 41 = 89 requests for 40,515
  deleted = 2.20). Here 4 x 11 LIST + 41 DeleteObjects = 85 for ~40,500.
* Time. Two of the peers delete one key per request (``aws s3 rm``,
  ``rclone delete``); at the embedded server's few hundred single deletes
  a second, 40,500 keys take two to three minutes each, and the whole run
  9 to 12.5 minutes on two cores shared with other work, more than the 5
  hoped for. Fewer keys would not keep the point: a data set of ~10,000
  eligible keys a shard with fewer shards leaves the sweeper fewer shards
  to list in parallel (``--objects 30000 --shards 2`` still has a floor of
  2.097 and runs in about 4 minutes); ``--peers`` picks the peers.

Contenders (``bench/peers.py``): epochgc's ``Sweeper.sweep`` (16 shard
listers, 8 DeleteObjects in flight); the single-threaded boto3
list-then-DeleteObjects script; ``s3cmd del``, ``aws s3 rm`` and
``rclone delete``, each with its defaults, filtered to the eligible epochs
by include patterns (``bench/epoch_patterns.py``). The Debian packages are
installed when missing (``scripts/install_bench_tools.sh``); a peer that
cannot be installed is reported ``skipped: <why>`` and the run FAILs.

The ceiling: the most LIST + DeleteObjects work the server completes per
second on this data, measured in the same run by clients that know the
data: the eligible keys cut into 1000-key slices, each one LIST page
entered with ``StartAfter`` and one DeleteObjects, all independent (the
fewest requests the work allows, with as much in flight as wanted), with
``N`` of them in flight for growing ``N`` (8, 24, 48 >= the 44 slices)
until more clients no longer raise the rate; the curve is printed, its maximum is the
ceiling, and every contender is shown as a fraction of it. The ceiling's
last point, epochgc, boto3 and s3cmd run ``--repeat`` times (2) in alternating
order and keep their fastest run (background load on shared cores comes
and goes); aws and rclone run once. "server busy"
is the CPU time this process (that is, the embedded server) used per
second of the contender's run: near 100% the server is the bottleneck, as
it is for any contender with enough requests in flight. The embedded
server sorts the bucket on every LIST page and serves one request at a
time under one interpreter lock, so its ceiling is far below S3's and
LIST pages dominate it; on S3 the same concurrency overlaps round trips.

The server runs with one fix (``bench/moto_listing.py``; ``--moto-as-is``
leaves it out): moto fails a LIST with a 500 when a key it walks is
deleted meanwhile, which S3 never does and which punishes exactly the
clients that list and delete at once (epochgc, aws, rclone): measured
before the fix, 24-41 of epochgc's LISTs and 1,144-1,229 of rclone's were
such retries, and ``aws s3 rm`` gave up after its 5 attempts.

Targets (issue 19): epochgc >= 0.8 of the ceiling, ahead of every peer,
<= 2.1 requests per 1000 deleted (every request the proxy saw that was not
answered 5xx; 5xx retries are shown apart), 0 ineligible deleted by
anyone.

Run from the repository root: ``python -m bench.bench_sweep``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench._harness import figures, setup_logging, verdict
from bench.latency_proxy import CONTROL_PREFIX
from bench.moto_listing import race_free_listing
from bench.peers import (
    PEER_COMMANDS,
    Command,
    Target,
    boto3_command,
    ceiling_command,
    ceiling_slices,
    epochgc_command,
    missing_tools,
)
from epochgc.storage.embedded import EMBEDDED_ACCESS_KEY, EMBEDDED_SECRET_KEY, EmbeddedS3
from epochgc.storage.keys import encode_l0_key, parse_l0_key
from tests.support.moto_seed import drop_bucket, seed_objects, stored_bytes, stored_keys

ROOT = "epochgc"
TARGET_FRACTION = 0.8
TARGET_REQUESTS_PER_1000 = 2.1
TARGET_RECORD_OVERHEAD = 0.01
"""The deletion record may add at most 1% to a sweep's requests (issue 29)."""
RUN_TIMEOUT_SECONDS = 900
SLOW_PEERS = frozenset({"aws", "rclone"})
"""Peers that delete one key per request: minutes per run, so run once."""

CommandFor = Callable[[Target, Path], Command]


@dataclass
class Outcome:
    """What one contender did, as the proxy and the bucket saw it."""

    name: str
    deleted: int = 0
    wrongly_deleted: int = 0
    eligible_left: int = 0
    span_seconds: float = 0.0
    wall_seconds: float = 0.0
    server_cpu_seconds: float = 0.0
    client_cpu_seconds: float = 0.0
    by_kind: dict[str, int] = field(default_factory=dict)
    retried_5xx: int = 0
    skipped: str = ""
    failed: str = ""
    record_bytes: int = 0
    """Bytes of the deletion record it left (``epochgc-record``)."""

    @property
    def rate(self) -> float:
        return self.deleted / self.span_seconds if self.span_seconds > 0 else 0.0

    @property
    def requests(self) -> int:
        return sum(self.by_kind.values()) - self.retried_5xx

    @property
    def requests_per_1000(self) -> float:
        return self.requests * 1000 / self.deleted if self.deleted else float("inf")

    @property
    def server_busy(self) -> float:
        return self.server_cpu_seconds / self.span_seconds if self.span_seconds else 0.0

    def line(self, ceiling: float) -> str:
        if self.skipped:
            return f"{self.name:11}: skipped: {self.skipped}"
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.by_kind.items()))
        fraction = f" = {self.rate / ceiling:4.2f} of ceiling" if ceiling else ""
        text = (
            f"{self.name:11}: {self.deleted:6d} deleted in {self.span_seconds:6.1f}s "
            f"(wall {self.wall_seconds:5.1f}s) = {self.rate:6.0f} objects/s{fraction}; "
            f"{self.requests} requests ({kinds}) = {self.requests_per_1000:7.2f}/1000; "
            f"{self.retried_5xx} retried 5xx; server busy {self.server_busy:4.0%}, "
            f"client CPU {self.client_cpu_seconds:5.1f}s; "
            f"{self.wrongly_deleted} ineligible deleted, {self.eligible_left} eligible left"
        )
        return text + (f"; FAILED: {self.failed}" if self.failed else "")


def children_cpu_seconds() -> float:
    """CPU seconds used so far by this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def make_keys(objects: int, shards: int, epochs: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        encode_l0_key(
            ROOT,
            rng.randrange(shards),
            rng.randrange(epochs),
            str(uuid.UUID(int=rng.getrandbits(128))),
        )
        for _ in range(objects)
    ]


def epoch_of(key: str) -> int:
    parsed = parse_l0_key(key, ROOT)
    assert parsed is not None
    return parsed.epoch


@contextmanager
def latency_proxy(upstream: str, latency_ms: float) -> Iterator[str]:
    """The proxy as a child process; yields its endpoint."""
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "bench.latency_proxy"),
            *("--upstream", upstream, "--delay-ms", str(latency_ms)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"latency proxy did not start: {line!r}")
        yield line.split()[-1]
    finally:
        process.terminate()
        process.wait(timeout=10)


def proxy_control(endpoint: str, verb: str) -> dict[str, object]:
    method = "POST" if verb == "reset" else "GET"
    request = urllib.request.Request(f"{endpoint}{CONTROL_PREFIX}{verb}", method=method)
    with urllib.request.urlopen(request, timeout=10) as answer:
        stats: dict[str, object] = json.loads(answer.read())
    return stats


class Bench:
    """Runs contenders one after the other, each on a fresh bucket."""

    def __init__(self, args: argparse.Namespace, keys: list[str], proxy: str) -> None:
        self.args = args
        self.keys = keys
        self.eligible = {k for k in keys if epoch_of(k) <= args.safe_epoch}
        self.proxy = proxy
        self._workdir = tempfile.TemporaryDirectory(prefix="bench-sweep-")
        self.workdir = Path(self._workdir.name)
        self.runs = 0

    def close(self) -> None:
        """Remove the contenders' config files."""
        self._workdir.cleanup()

    def target(self, bucket: str) -> Target:
        return Target(
            endpoint=self.proxy,
            bucket=bucket,
            root=ROOT,
            shards=self.args.shards,
            safe_epoch=self.args.safe_epoch,
            access_key=EMBEDDED_ACCESS_KEY,
            secret_key=EMBEDDED_SECRET_KEY,
        )

    def run(self, s3: EmbeddedS3, name: str, command_for: CommandFor) -> Outcome:
        self.runs += 1
        bucket = f"sweep-{self.runs}-{name}"
        s3.create_bucket(bucket)
        seed_objects(bucket, self.keys)
        command = command_for(self.target(bucket), self.workdir)
        outcome = Outcome(name)
        proxy_control(self.proxy, "reset")
        cpu_before = time.process_time()
        client_before = children_cpu_seconds()
        started = time.perf_counter()
        try:
            done = subprocess.run(
                command.argv,
                env=command.env,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_SECONDS,
                check=False,
            )
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
                outcome.failed = f"exit {done.returncode}: {tail[0] if tail else ''}"
        except subprocess.TimeoutExpired:
            outcome.failed = f"timed out after {RUN_TIMEOUT_SECONDS}s"
        outcome.wall_seconds = time.perf_counter() - started
        outcome.server_cpu_seconds = time.process_time() - cpu_before
        outcome.client_cpu_seconds = children_cpu_seconds() - client_before
        stats = proxy_control(self.proxy, "stats")
        outcome.by_kind = dict(stats["by_kind"])  # type: ignore[call-overload]
        outcome.retried_5xx = sum(
            count
            for status, count in stats["by_status"].items()  # type: ignore[attr-defined]
            if status.endswith("5xx")
        )
        if stats["first_at"] is not None and stats["last_at"] is not None:
            outcome.span_seconds = float(stats["last_at"]) - float(stats["first_at"])  # type: ignore[arg-type]
        left = stored_keys(bucket)
        gone = set(self.keys) - left
        outcome.deleted = len(gone & self.eligible)
        outcome.wrongly_deleted = len(gone - self.eligible)
        outcome.eligible_left = len(self.eligible & left)
        outcome.record_bytes = stored_bytes(bucket, f"{ROOT}/gc/runs/")
        drop_bucket(bucket)
        print(outcome.line(0.0), flush=True)
        return outcome


def best_run(outcomes: list[Outcome]) -> Outcome:
    """The fastest of a contender's runs, unless one went wrong: then that
    one, so that no failure hides behind a good run."""
    wrong = [o for o in outcomes if o.failed or o.wrongly_deleted or o.eligible_left]
    return wrong[0] if wrong else max(outcomes, key=lambda o: o.rate)


def floor_line(keys: list[str], safe_epoch: int) -> str:
    """The fewest requests any client needs on this data: a LIST page per
    1000 eligible keys of each shard (rounded up) and a DeleteObjects per
    1000 eligible keys (rounded up). A client that does not know where a
    shard's eligible keys end needs one more page for a shard whose count
    is a multiple of 1000."""
    per_shard: dict[int, int] = {}
    for key in keys:
        parsed = parse_l0_key(key, ROOT)
        assert parsed is not None
        if parsed.epoch <= safe_epoch:
            per_shard[parsed.shard] = per_shard.get(parsed.shard, 0) + 1
    eligible = sum(per_shard.values())
    pages = sum(-(-e // 1000) for e in per_shard.values())
    deletes = -(-eligible // 1000)
    counts = ", ".join(str(per_shard[s]) for s in sorted(per_shard))
    return (
        f"eligible per shard: {counts}; fewest requests on this data: {pages} LIST + "
        f"{deletes} DeleteObjects = {(pages + deletes) * 1000 / max(eligible, 1):.3f}/1000"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=50_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--safe-epoch", type=int, default=80)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument(
        "--ceiling-clients",
        default="8,24,48",
        help="client counts of the ceiling curve (comma-separated)",
    )
    parser.add_argument(
        "--peers", default="s3cmd,aws,rclone", help="peer tools to run (comma-separated)"
    )
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--moto-as-is",
        action="store_true",
        help="keep moto's LIST-versus-delete race (see bench/moto_listing.py)",
    )
    parser.add_argument(
        "--repeat", type=int, default=2, help="runs of each fast contender (best one counts)"
    )
    args = parser.parse_args()
    setup_logging()
    # A SIGTERM (run_all's timeout, a user's kill) unwinds like Ctrl-C, so
    # the proxy and the server are stopped rather than orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    keys = make_keys(args.objects, args.shards, args.epochs, args.seed)
    peers = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(peers) - set(PEER_COMMANDS))
    if unknown:
        parser.error(f"unknown peers {unknown}; known: {sorted(PEER_COMMANDS)}")
    skipped = missing_tools(peers)
    listing = contextlib.nullcontext(False) if args.moto_as_is else race_free_listing()
    with (
        listing as race_free,
        EmbeddedS3() as s3,
        latency_proxy(s3.endpoint_url, args.latency_ms) as proxy,
    ):
        # moto logs a traceback for every 500 it answers (the proxy counts them).
        logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
        bench = Bench(args, keys, proxy)
        print(
            f"{args.objects} L0 objects, {args.shards} shards, epochs 0..{args.epochs - 1}, "
            f"M={args.safe_epoch}: {len(bench.eligible)} eligible; "
            f"{args.latency_ms:g} ms added to every request by the proxy",
            flush=True,
        )
        print(floor_line(keys, args.safe_epoch), flush=True)
        print(
            "embedded server: a LIST racing a delete is answered (bench/moto_listing.py)"
            if race_free
            else "embedded server as is: a LIST racing a delete fails with a 500 and is retried",
            flush=True,
        )
        slices = ceiling_slices(keys, ROOT, args.safe_epoch)
        commands: dict[str, CommandFor] = {
            f"ceiling-{n}": functools.partial(ceiling_command, clients=n, slices=slices)
            for n in (int(c) for c in args.ceiling_clients.split(","))
        }
        commands |= {
            "epochgc": epochgc_command,
            "epochgc-record": functools.partial(epochgc_command, record=True),
            "boto3": boto3_command,
        }
        commands |= {p: PEER_COMMANDS[p] for p in peers if p not in skipped}
        # The fast ones (the ceiling's last point, epochgc, boto3, s3cmd)
        # run --repeat times, in alternating order, and keep their best
        # run: background load on a shared machine comes and goes, and a
        # contender should not lose to a busy minute. The per-key deleters
        # take minutes and run once.
        points = [n for n in commands if n.startswith("ceiling-")]
        fast = [points[-1], *(n for n in commands if n not in SLOW_PEERS | set(points))]
        runs: dict[str, list[Outcome]] = {n: [] for n in commands}
        for name in points[:-1]:  # the lower points of the curve: once
            runs[name].append(bench.run(s3, name, commands[name]))
        for round_number in range(args.repeat):
            for name in fast if round_number % 2 == 0 else fast[::-1]:
                runs[name].append(bench.run(s3, name, commands[name]))
        for name in commands:
            if name in SLOW_PEERS:
                runs[name].append(bench.run(s3, name, commands[name]))
        best = {name: best_run(outcomes) for name, outcomes in runs.items()}
        curve = [best[n] for n in commands if n.startswith("ceiling-")]
        contenders = [best["epochgc"], best["boto3"]]
        for peer in peers:
            contenders.append(
                Outcome(peer, skipped=skipped[peer]) if peer in skipped else best[peer]
            )
        bench.close()
    audit_ok = record_overhead(best["epochgc"], best["epochgc-record"])
    return report(curve, contenders, len(bench.eligible), audit_ok)


def record_overhead(plain: Outcome, recorded: Outcome) -> bool:
    """Print what the deletion record adds per million keys deleted (the
    same sweep with and without it); whether it is within its target."""
    if not plain.deleted or not recorded.deleted or recorded.failed:
        print(f"deletion record: not measured ({recorded.failed or 'nothing deleted'})")
        return False
    per_key, base = recorded.requests / recorded.deleted, plain.requests / plain.deleted
    share = per_key / base - 1
    megabytes = recorded.record_bytes / recorded.deleted  # bytes a key = MB a million keys
    print(
        f"deletion record: {recorded.by_kind.get('PUT', 0)} PUT, {recorded.record_bytes} bytes "
        f"for {recorded.deleted} keys; per million keys deleted +{(per_key - base) * 1e6:.0f} "
        f"requests (+{share:.2%}; target <= {TARGET_RECORD_OVERHEAD:.0%}) and "
        f"+{megabytes:.1f} MB stored until the run's retention"
    )
    return share <= TARGET_RECORD_OVERHEAD


def report(curve: list[Outcome], contenders: list[Outcome], eligible: int, audit_ok: bool) -> int:
    ceiling = max(c.rate for c in curve)
    print("the store's ceiling (N clients listing and deleting their own slices):")
    for point in curve:
        print("  " + point.line(ceiling))
    print(f"ceiling: {ceiling:.0f} objects/s")
    for c in contenders:
        print(c.line(ceiling))
    epochgc, peers = contenders[0], contenders[1:]
    ran = [p for p in peers if not p.skipped]
    best = max(ran, key=lambda p: p.rate, default=None)
    fraction = epochgc.rate / ceiling if ceiling else 0.0
    problems = [f"{p.name} skipped: {p.skipped}" for p in peers if p.skipped]
    problems += [f"{c.name}: {c.failed}" for c in curve + contenders if c.failed]
    problems += [
        f"{c.name} left {c.eligible_left} of {eligible} eligible"
        for c in curve + contenders
        if not c.skipped and c.eligible_left
    ]
    wrong = sum(c.wrongly_deleted for c in curve + contenders)
    ahead = all(epochgc.rate > p.rate for p in ran)
    checks = {
        "deletion record overhead": audit_ok,
        "problems": not problems,
        "ineligible deleted": wrong == 0,
        "fraction of the ceiling": fraction >= TARGET_FRACTION,
        "ahead of every peer": ahead,
        "requests per 1000": epochgc.requests_per_1000 <= TARGET_REQUESTS_PER_1000,
    }
    missed = [name for name, ok in checks.items() if not ok]
    passed = not missed
    for problem in problems:
        print(f"PROBLEM: {problem}")
    best_text = f"best peer {best.name} {best.rate:.0f} objects/s" if best else "no peer ran"
    figures(
        f"{epochgc.rate:.0f} objects/s, {epochgc.requests_per_1000:.2f} req/1000",
        f"ceiling {ceiling:.0f} objects/s; {best_text}",
        f"{fraction:.2f} of ceiling",
    )
    return verdict(
        "sweep",
        f"{fraction:.2f} of the store's ceiling, "
        f"{'ahead of' if ahead else 'NOT ahead of'} every peer ({best_text}), "
        f"{epochgc.requests_per_1000:.2f} requests/1000 deleted, {wrong} ineligible deleted"
        + (f", {len(problems)} problem(s)" if problems else "")
        + (f"; missed: {', '.join(missed)}" if missed else ""),
        f">= {TARGET_FRACTION:g}, ahead, <= {TARGET_REQUESTS_PER_1000}, 0, "
        f"deletion record <= {TARGET_RECORD_OVERHEAD:.0%}",
        passed,
    )


if __name__ == "__main__":
    try:
        code = main()
    except SystemExit as stop:  # argparse, or the SIGTERM handler
        code = stop.code if isinstance(stop.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    # Tearing down the interpreter after the embedded server has held a few
    # hundred thousand objects takes from seconds to minutes (C-level
    # finalisation, not Python code); nothing is left to write.
    os._exit(code)
