#!/usr/bin/env python3
"""A streaming system that is not epochgc, writing what epochgc needs to
collect its temporary (L0) objects. Plain boto3: nothing here imports
epochgc, so this is exactly what another system would have to do, following
docs/contract.md and docs/integrating.md.

It does, in order:

1. honours the layout marker ``{root}/meta/layout.json`` (writes
   ``{"layout":2,"v":1}`` create-only on a fresh root; refuses any other
   layout);
2. creates a topic in the controller log: a create-only PUT of a
   ``create_topic`` entry at the next controller offset, retried at the
   next offset on 412/409; the offset it lands at is the topic's revision;
3. for a few epochs: stamps L0 keys with the current cluster epoch, then
   ticks the epoch (a create-only ``epoch_tick`` at the next offset);
4. publishes a version 2 node report whose entries give ``M(p)`` for every
   partition of the topic;
5. prints, as JSON, the keys it expects ``epochgc gc collect`` to delete
   (epoch <= M) and to keep.

Usage::

    python examples/foreign_writer.py --endpoint http://127.0.0.1:9000 \\
        --bucket epochgc --root epochgc

Credentials: ``--access-key`` / ``--secret-key``, else the standard AWS
chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, profiles, roles).

Run it against a root where nothing else pins ``M`` (no other live topic
with lower ``M(p)``), or the "expected" lists are an upper bound.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import ClientError

ENTRY_KEY = re.compile(r"[0-9]{20}")
LAYOUT = 2
LOST_RACE = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")
"""412: the slot is taken; 409: a concurrent conditional write on it."""


# --- small helpers ---------------------------------------------------------


def now_text() -> str:
    """RFC 3339 UTC, second precision, ``Z`` suffix (what epochgc writes)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def dump(doc: dict[str, Any]) -> bytes:
    """Sorted keys, no spaces: identical documents give identical bytes,
    which lets a retried create-only PUT recognise its own earlier write."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def put_if_absent(s3: Any, bucket: str, key: str, body: bytes) -> bool:
    """Create-only PUT (``If-None-Match: *``). True: written by us (or the
    slot already holds exactly these bytes); False: someone else holds it."""
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
    except ClientError as err:
        if error_code(err) not in LOST_RACE:
            raise
        try:
            return bool(s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body)
        except ClientError as missing:
            if error_code(missing) in ("NoSuchKey", "404"):
                return put_if_absent(s3, bucket, key, body)  # 409 and the other writer gave up
            raise
    return True


def list_keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys


def read_json(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as err:
        if error_code(err) in ("NoSuchKey", "404"):
            return None
        raise
    doc = json.loads(body)
    if not isinstance(doc, dict):
        raise SystemExit(f"{key}: not a JSON object")
    return doc


# --- 1. the layout marker ----------------------------------------------------


def ensure_layout(s3: Any, bucket: str, root: str) -> None:
    """Refuse a root of another layout; mark a fresh one as layout 2.

    epochgc itself also refuses an unmarked root that holds layout-1 keys
    (``{root}/meta/partitions/{topic}/{partition}/...``); this writer does
    not write those, so a create-only marker is all it needs.
    """
    key = f"{root}/meta/layout.json"
    marker = read_json(s3, bucket, key)
    if marker is None:
        put_if_absent(s3, bucket, key, dump({"v": 1, "layout": LAYOUT}))
        marker = read_json(s3, bucket, key)
    if marker is None or marker.get("layout") != LAYOUT:
        raise SystemExit(f"{key} says {marker!r}; this writer knows layout {LAYOUT} only")


# --- 2. the controller log ---------------------------------------------------


class ControllerLog:
    """The controller log ``{root}/meta/controller/{offset:020d}``: the
    newest offset is the cluster epoch; a topic's revision is the offset of
    its ``create_topic``."""

    def __init__(self, s3: Any, bucket: str, root: str) -> None:
        self.s3, self.bucket = s3, bucket
        self.prefix = f"{root}/meta/controller/"

    def offsets(self) -> list[int]:
        """Offsets present, ascending (the ``snapshot`` object is skipped:
        it is not 20 digits)."""
        names = (key[len(self.prefix) :] for key in list_keys(self.s3, self.bucket, self.prefix))
        return sorted(int(name) for name in names if ENTRY_KEY.fullmatch(name))

    def epoch(self) -> int:
        """The cluster epoch: the newest offset (0 for an empty log)."""
        offsets = self.offsets()
        return offsets[-1] if offsets else 0

    def live_topics(self) -> dict[str, dict[str, int]]:
        """``{name: {"revision", "partitions"}}``: the compacted snapshot's
        topics, then every entry after it, in offset order. A
        ``create_topic`` of a name already live changes nothing (the first
        one wins), a ``delete_topic`` removes it."""
        topics: dict[str, dict[str, int]] = {}
        covered = 0
        snapshot = read_json(self.s3, self.bucket, f"{self.prefix}snapshot")
        if snapshot is not None:
            covered = int(snapshot["offset"])
            for item in snapshot["topics"]:
                topics[item["topic"]] = {
                    "revision": item["revision"],
                    "partitions": item["partitions"],
                }
        for offset in self.offsets():
            if offset <= covered:
                continue
            entry = read_json(self.s3, self.bucket, self.key(offset))
            if entry is None:  # truncated under us by a compaction: start again
                return self.live_topics()
            if entry.get("type") == "create_topic" and entry["topic"] not in topics:
                topics[entry["topic"]] = {"revision": offset, "partitions": entry["partitions"]}
            elif entry.get("type") == "delete_topic":
                topics.pop(entry["topic"], None)
        return topics

    def key(self, offset: int) -> str:
        return f"{self.prefix}{offset:020d}"

    def append(self, entry: dict[str, Any], attempts: int = 50) -> int:
        """Create-only PUT at the next offset; on a lost race (412/409)
        re-list and try the next one. Returns the offset written."""
        body = dump(entry)
        offset = self.epoch() + 1
        for _ in range(attempts):
            if put_if_absent(self.s3, self.bucket, self.key(offset), body):
                return offset
            offset = max(offset, self.epoch()) + 1
        raise SystemExit(f"controller append lost {attempts} races in a row")

    def create_topic(self, name: str, partitions: int) -> int:
        """Create ``name``; return its revision. The ``ts`` makes the bytes
        unique to this writer, so a lost race is never mistaken for ours."""
        if name in self.live_topics():
            raise SystemExit(f"topic {name!r} already exists")
        entry = {
            "v": 1,
            "type": "create_topic",
            "topic": name,
            "partitions": partitions,
            # Ours to reconcile: epochgc's reconciler never leads this topic.
            "config": {"reconciler": "foreign-writer", "created_by": f"fw-{uuid.uuid4()}"},
            "ts": now_text(),
        }
        offset = self.append(entry)
        if self.live_topics().get(name, {}).get("revision") != offset:
            raise SystemExit(f"topic {name!r} was created concurrently by another writer")
        return offset

    def tick(self) -> int:
        """Move the cluster epoch by one (skip this when an epochgc ticker runs)."""
        return self.append({"v": 1, "type": "epoch_tick", "ts": now_text()})


# --- 3. L0 keys and 4. the node report -----------------------------------------


def l0_key(root: str, shard: int, epoch: int) -> str:
    """``{root}/l0/{shard:03d}/{epoch:018d}/{uuid}``: exactly this shape, or
    epochgc never deletes it."""
    return f"{root}/l0/{shard:03d}/{epoch:018d}/{uuid.uuid4()}"


def node_report(node: str, topic: str, revision: int, partitions: int, safe_epoch: int) -> bytes:
    """A version 2 report: one entry per partition, ``safe_epoch`` = M(p)."""
    return dump(
        {
            "v": 2,
            "node": node,
            "generated_at": now_text(),
            "partitions": [
                {
                    "topic": topic,
                    "revision": revision,
                    "partition": partition,
                    "term": 1,
                    "safe_epoch": safe_epoch,
                    "lro": -1,
                    "max_applied_epoch": safe_epoch + 1,
                    "previous_applied_epoch": safe_epoch + 1,
                }
                for partition in range(partitions)
            ],
        }
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--endpoint", help="S3 endpoint URL (default: AWS)")
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--root", default="epochgc")
    parser.add_argument("--access-key")
    parser.add_argument("--secret-key")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--topic", default="foreign-orders")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument(
        "--node-id",
        help="the report's node id (default: foreign-writer-TOPIC, so that runs for "
        "different topics keep one report each: a node's report replaces its last one)",
    )
    parser.add_argument("--shards", type=int, default=16, help="write into shards 0..N-1 (1..1000)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs to write objects at")
    parser.add_argument("--reconciled", type=int, default=2, help="how many of them are done")
    args = parser.parse_args(argv)
    if not 0 <= args.reconciled <= args.epochs:
        parser.error("--reconciled must be within 0..--epochs")

    s3 = boto3.client(
        "s3",
        endpoint_url=args.endpoint,
        region_name=args.region,
        aws_access_key_id=args.access_key,
        aws_secret_access_key=args.secret_key,
    )
    ensure_layout(s3, args.bucket, args.root)
    log = ControllerLog(s3, args.bucket, args.root)
    revision = log.create_topic(args.topic, args.partitions)

    written: dict[int, list[str]] = {}
    epoch = revision
    for step in range(args.epochs):
        # Stamp with the current cluster epoch (never older than the topic's
        # revision), upload, then accept the data under that epoch.
        for _ in range(3):
            key = l0_key(args.root, random.randrange(args.shards), epoch)
            s3.put_object(Bucket=args.bucket, Key=key, Body=f"records@{epoch}".encode())
            written.setdefault(epoch, []).append(key)
        if step < args.epochs - 1:
            epoch = log.tick()

    # Our system has moved the data of the first `reconciled` epochs to its
    # long-term store, and its partitions now refuse writes stamped with
    # those epochs: M(p) is the newest such epoch. (With none done, M(p) is
    # revision - 1: nothing of this topic may go.)
    epochs = sorted(written)
    safe_epoch = epochs[args.reconciled - 1] if args.reconciled else revision - 1
    if args.node_id is None:
        args.node_id = f"foreign-writer-{args.topic}"
    report_key = f"{args.root}/meta/reports/{args.node_id}"
    s3.put_object(
        Bucket=args.bucket,
        Key=report_key,
        Body=node_report(args.node_id, args.topic, revision, args.partitions, safe_epoch),
    )
    json.dump(
        {
            "topic": args.topic,
            "revision": revision,
            "cluster_epoch": log.epoch(),
            "safe_epoch": safe_epoch,
            "report": report_key,
            "expect_deleted": sorted(k for e in epochs if e <= safe_epoch for k in written[e]),
            "expect_kept": sorted(k for e in epochs if e > safe_epoch for k in written[e]),
        },
        sys.stdout,
        indent=2,
    )
    print()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ClientError as err:  # one line, not a traceback: the store said no
        sys.exit(f"foreign_writer: {err}")
