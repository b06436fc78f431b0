"""Benchmark helper: the contenders of ``bench_sweep``, each a command line
run as its own process against one bucket behind the latency proxy.

Every contender deletes the L0 objects of epochs ``<= M`` under
``{root}/l0/`` and nothing else:

* ``epochgc``: ``Sweeper.sweep`` over every shard (the collector's code
  path with the delete-fraction guard off);
* ``boto3``: the script a user would write: list the L0 prefix, keep the
  keys whose epoch is ``<= M``, DeleteObjects of 1000, one request at a
  time;
* ``s3cmd``: ``s3cmd del --recursive --exclude '*' --include ...`` (with
  include rules s3cmd lists the prefix, then DeleteObjects of 1000);
* ``aws``: ``aws s3 rm --recursive --exclude '*' --include ...`` (lists
  and deletes at once, one DeleteObject per key; 20 attempts per request
  rather than 5, see ``aws_command``);
* ``rclone``: ``rclone delete --include ...`` with the S3 backend
  (``provider = Other``, path style; lists directory by directory, pruning
  the ones no include can match, then one DeleteObject per key).

The peers run with their defaults except for concurrency: aws and rclone
keep ``IN_FLIGHT`` requests in flight (as many as epochgc's shard listers)
rather than their defaults of 10 and 4, which a user deleting tens of
thousands of objects would raise too; s3cmd has no such setting.

``ceiling`` is not a contender but the store's ceiling: ``N`` clients
sharing the eligible keys cut into 1000-key slices known in advance
(``ceiling_slices``), each slice one LIST page entered with ``StartAfter``
and one DeleteObjects.

This module is also the program the ``epochgc``, ``boto3`` and ``ceiling``
command lines run (``python -m bench.peers MODE ...``); each prints one
JSON line with what it did.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.epoch_patterns import fnmatch_includes, rclone_includes

INSTALL_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "install_bench_tools.sh"
IN_FLIGHT = 16
"""Requests the peers that can run several at once keep in flight (aws:
``max_concurrent_requests``, default 10; rclone: ``--checkers`` and
``--transfers``, default 8 and 4): as many as epochgc's shard listers."""
PEER_TOOLS = {"s3cmd": "s3cmd", "aws": "aws", "rclone": "rclone"}
RECORD_RUN_ID = "20260101T000000Z-bench000"
"""The run id the ``epochgc-record`` contender files its record under."""
"""Contender name -> the executable it needs."""


@dataclass(frozen=True)
class Target:
    """Where a contender works: a bucket behind ``endpoint`` (the proxy)."""

    endpoint: str
    bucket: str
    root: str
    shards: int
    safe_epoch: int
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    @property
    def l0_uri(self) -> str:
        return f"s3://{self.bucket}/{self.root}/l0/"

    def args(self) -> list[str]:
        return [
            "--endpoint",
            self.endpoint,
            "--bucket",
            self.bucket,
            "--root",
            self.root,
            "--shards",
            str(self.shards),
            "--safe-epoch",
            str(self.safe_epoch),
        ]


@dataclass(frozen=True)
class Command:
    """One contender's command line and environment."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def _credentials_env(target: Target, workdir: Path) -> dict[str, str]:
    """An environment that reaches only ``target``: the benchmark's own
    static pair, no user config or credential files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID=target.access_key,
        AWS_SECRET_ACCESS_KEY=target.secret_key,
        AWS_DEFAULT_REGION=target.region,
        AWS_CONFIG_FILE=str(workdir / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(workdir / "aws-credentials"),
        HOME=str(workdir),
    )
    return env


def epochgc_command(target: Target, workdir: Path, *, record: bool = False) -> Command:
    """epochgc's sweep; ``record``: with the deletion record a collection
    round writes (``gc.record_deletions``, uploaded when the sweep ends)."""
    return Command(
        "epochgc-record" if record else "epochgc",
        [
            sys.executable,
            "-m",
            "bench.peers",
            "epochgc",
            *target.args(),
            *(["--record"] if record else []),
        ],
        _credentials_env(target, workdir),
    )


def boto3_command(target: Target, workdir: Path) -> Command:
    return Command(
        "boto3",
        [sys.executable, "-m", "bench.peers", "boto3", *target.args()],
        _credentials_env(target, workdir),
    )


def ceiling_command(
    target: Target, workdir: Path, *, clients: int, slices: list[tuple[str, str]]
) -> Command:
    """The ceiling's ``clients`` threads sharing ``slices`` (see
    ``ceiling_slices``)."""
    slices_file = workdir / f"slices-{target.bucket}.json"
    slices_file.write_text(json.dumps(slices))
    return Command(
        f"ceiling-{clients}",
        [
            sys.executable,
            "-m",
            "bench.peers",
            "ceiling",
            *target.args(),
            "--clients",
            str(clients),
            "--slices",
            str(slices_file),
        ],
        _credentials_env(target, workdir),
    )


def s3cmd_command(target: Target, workdir: Path) -> Command:
    host = target.endpoint.removeprefix("http://")
    config = workdir / "s3cfg"
    config.write_text(
        "[default]\n"
        f"access_key = {target.access_key}\n"
        f"secret_key = {target.secret_key}\n"
        f"host_base = {host}\n"
        f"host_bucket = {host}\n"  # no %(bucket)s: path-style requests
        f"bucket_location = {target.region}\n"
        "use_https = False\n"
        "signature_v2 = False\n"
    )
    argv = ["s3cmd", "-c", str(config), "del", "--recursive", "--exclude", "*"]
    for pattern in fnmatch_includes(target.safe_epoch):
        argv += ["--include", pattern]
    return Command("s3cmd", [*argv, target.l0_uri], _credentials_env(target, workdir))


def aws_command(target: Target, workdir: Path) -> Command:
    (workdir / "aws-config").write_text(
        f"[default]\nregion = {target.region}\n"
        # The embedded server answers 500 to a LIST that walks the bucket
        # while a delete removes a key (S3 does not); aws s3 rm lists and
        # deletes at once, and its default 5 attempts let it give up.
        "retry_mode = standard\nmax_attempts = 20\n"
        f"s3 =\n  addressing_style = path\n  max_concurrent_requests = {IN_FLIGHT}\n"
    )
    argv = [
        "aws",
        "--endpoint-url",
        target.endpoint,
        "s3",
        "rm",
        target.l0_uri,
        "--recursive",
        "--only-show-errors",
        "--exclude",
        "*",
    ]
    for pattern in fnmatch_includes(target.safe_epoch):
        argv += ["--include", pattern]
    return Command("aws", argv, _credentials_env(target, workdir))


def rclone_command(target: Target, workdir: Path) -> Command:
    config = workdir / "rclone.conf"
    config.write_text(
        "[bench]\n"
        "type = s3\n"
        "provider = Other\n"
        f"endpoint = {target.endpoint}\n"
        f"access_key_id = {target.access_key}\n"
        f"secret_access_key = {target.secret_key}\n"
        f"region = {target.region}\n"
        "force_path_style = true\n"
    )
    argv = ["rclone", "--config", str(config), "delete", "-q"]
    argv += ["--checkers", str(IN_FLIGHT), "--transfers", str(IN_FLIGHT)]
    for pattern in rclone_includes(target.safe_epoch):
        argv += ["--include", pattern]
    remote = f"bench:{target.bucket}/{target.root}/l0"
    return Command("rclone", [*argv, remote], _credentials_env(target, workdir))


PEER_COMMANDS = {"s3cmd": s3cmd_command, "aws": aws_command, "rclone": rclone_command}


def missing_tools(names: list[str]) -> dict[str, str]:
    """Install the peers' Debian packages when missing (``scripts/
    install_bench_tools.sh``); return ``{name: why}`` for those still
    missing, so the caller reports them skipped (and fails)."""
    wanted = [PEER_TOOLS[n] for n in names if shutil.which(PEER_TOOLS[n]) is None]
    if not wanted:
        return {}
    done = subprocess.run(
        ["bash", str(INSTALL_SCRIPT), *wanted], capture_output=True, text=True, check=False
    )
    why = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
    return {
        n: f"{PEER_TOOLS[n]} not installed ({why[0]})"
        for n in names
        if shutil.which(PEER_TOOLS[n]) is None
    }


# --- the programs behind the epochgc, boto3 and ceiling command lines -------


def _client(endpoint: str, pool: int) -> Any:
    """A boto3 client as a careful user would configure it: path style,
    standard retries (the embedded server answers 500 to a LIST racing a
    delete), checksums only where S3 requires them."""
    import boto3  # noqa: PLC0415 - only the child programs need it
    from botocore.config import Config  # noqa: PLC0415

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        config=Config(
            retries={"mode": "standard", "total_max_attempts": 5},
            max_pool_connections=pool,
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )


def _epoch_of(key: str, root: str) -> int | None:
    from epochgc.storage.keys import parse_l0_key  # noqa: PLC0415

    parsed = parse_l0_key(key, root)
    return None if parsed is None else parsed.epoch


def run_epochgc(args: argparse.Namespace) -> dict[str, Any]:
    from epochgc.gc.sweeper import DeleteBatchDone, Sweeper, SweepPolicy  # noqa: PLC0415
    from epochgc.storage.client import ClientSettings, make_s3_client  # noqa: PLC0415
    from epochgc.storage.s3 import S3ObjectStore  # noqa: PLC0415

    client = make_s3_client(
        ClientSettings(
            endpoint_url=args.endpoint,
            access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            addressing_style="path",
        )
    )
    sweeper = Sweeper(
        S3ObjectStore(client, args.bucket),
        args.root,
        SweepPolicy(
            min_object_age=timedelta(0),
            shard_concurrency=args.shard_concurrency,
            delete_concurrency=args.delete_concurrency,
        ),
    )
    from epochgc.gc.deletion_record import DeletionRecord  # noqa: PLC0415
    from epochgc.storage.keys import gc_run_deleted_key  # noqa: PLC0415

    with DeletionRecord(args.root, args.safe_epoch) as record:
        if args.record:
            sweeper.events.subscribe(DeleteBatchDone, record.on_batch_done)
        result = sweeper.sweep(
            range(args.shards),
            args.safe_epoch,
            datetime.now(UTC) + timedelta(hours=1),
        )
        if args.record and record.rows:
            key = gc_run_deleted_key(args.root, RECORD_RUN_ID, 0)
            record.upload(S3ObjectStore(client, args.bucket), key)
    return {"deleted": result.deleted, "errors": result.errors, "samples": result.error_samples}


def run_boto3(args: argparse.Namespace) -> dict[str, Any]:
    client = _client(args.endpoint, 10)
    eligible: list[str] = []
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=args.bucket, Prefix=f"{args.root}/l0/"
    )
    for page in pages:
        for item in page.get("Contents", []):
            epoch = _epoch_of(item["Key"], args.root)
            if epoch is not None and epoch <= args.safe_epoch:
                eligible.append(item["Key"])
    deleted = errors = 0
    for i in range(0, len(eligible), 1000):
        answer = client.delete_objects(
            Bucket=args.bucket,
            Delete={"Objects": [{"Key": k} for k in eligible[i : i + 1000]], "Quiet": True},
        )
        errors += len(answer.get("Errors", []))
        deleted += min(1000, len(eligible) - i) - len(answer.get("Errors", []))
    return {"deleted": deleted, "errors": errors}


def ceiling_slices(keys: list[str], root: str, safe_epoch: int) -> list[tuple[str, str]]:
    """``(shard prefix, StartAfter)`` of every 1000-key run of eligible keys.

    The ceiling's clients know the data (the benchmark seeded it), so each
    slice is exactly one LIST page and one DeleteObjects, and all slices
    are independent: the fewest requests the work allows, with as many in
    flight as there are slices. No real client can do better, which is
    what makes it a ceiling.
    """
    by_shard: dict[str, list[str]] = {}
    for key in keys:
        epoch = _epoch_of(key, root)
        if epoch is not None and epoch <= safe_epoch:
            by_shard.setdefault(key[: key.rindex("/", 0, key.rindex("/")) + 1], []).append(key)
    slices = []
    for prefix, eligible in sorted(by_shard.items()):
        eligible.sort()
        slices += [(prefix, eligible[i - 1] if i else "") for i in range(0, len(eligible), 1000)]
    return slices


def run_ceiling(args: argparse.Namespace) -> dict[str, Any]:
    client = _client(args.endpoint, args.clients + 4)
    work: queue.Queue[tuple[str, str]] = queue.Queue()
    for prefix, start_after in json.loads(Path(args.slices).read_text()):
        work.put((prefix, start_after))
    lock = threading.Lock()
    totals: dict[str, Any] = {"deleted": 0, "errors": 0, "samples": []}

    def one_slice(prefix: str, start_after: str) -> None:
        page = client.list_objects_v2(
            Bucket=args.bucket, Prefix=prefix, StartAfter=start_after, MaxKeys=1000
        )
        keys = []
        for item in page.get("Contents", []):
            epoch = _epoch_of(item["Key"], args.root)
            if epoch is not None and epoch <= args.safe_epoch:
                keys.append(item["Key"])
        if not keys:
            return
        answer = client.delete_objects(
            Bucket=args.bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
        )
        failed = len(answer.get("Errors", []))
        with lock:
            totals["deleted"] += len(keys) - failed
            totals["errors"] += failed

    def worker() -> None:
        while True:
            try:
                prefix, start_after = work.get_nowait()
            except queue.Empty:
                return
            try:
                one_slice(prefix, start_after)
            except Exception as err:  # counted; the run then exits 1
                with lock:
                    totals["errors"] += 1
                    totals["samples"].append(f"{prefix} after {start_after!r}: {err}")

    threads = [threading.Thread(target=worker) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["epochgc", "boto3", "ceiling"])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--safe-epoch", type=int, required=True)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--slices", help="ceiling: JSON file of (prefix, StartAfter) slices")
    parser.add_argument("--shard-concurrency", type=int, default=16)
    parser.add_argument("--delete-concurrency", type=int, default=8)
    parser.add_argument(
        "--record", action="store_true", help="epochgc: write the run's deletion record"
    )
    args = parser.parse_args()
    runner = {"epochgc": run_epochgc, "boto3": run_boto3, "ceiling": run_ceiling}[args.mode]
    started = time.perf_counter()
    outcome = runner(args)
    outcome["seconds"] = time.perf_counter() - started
    print(json.dumps(outcome))
    if outcome.get("errors"):
        samples = outcome.get("samples")
        print(f"{args.mode}: {outcome['errors']} errors, e.g. {samples}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
