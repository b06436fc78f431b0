"""One process of an ``epochgc verify`` run: a reconciler node with its
producers, or a GC daemon, talking to the bucket through a ``FaultyStore``.

It writes what the checker needs into the run's folder, line by line and
flushed, so a ``kill -9`` loses at most the line being written:

* ``acks-{id}.jsonl``: every acknowledged record (topic, revision,
  partition, offset, record), written after ``produce`` returned; a record's
  payload ``{id}.{seed}@{revision}:{n}`` is unique in the run and names the
  incarnation it was produced to, so the checker can tell a record that
  leaked into another incarnation of the same topic name;
* ``deletes-{id}.jsonl``: every key a GC process is about to delete, with
  the time;
* ``m-{id}.jsonl``: the ``M`` a daemon used, over time;
* ``faults-{id}.json``: faults injected so far.

The files ``faults-off`` and ``producers-off`` in the folder switch faults
and producing off (the checker's quiesce); while ``reconcile-lag`` exists,
every L1 write takes two seconds longer, so the reconcilers fall behind the
producers (the driver sets it around a topic delete-and-recreate). SIGTERM stops the process
cleanly. Run as ``python -m epochgc.verify.worker``.

``--unsafe-test-build`` (passed by ``epochgc verify --unsafe-test-build``)
makes this process's node publish ``M(p) = max_applied_epoch - 1``
(``unsafe_max_applied_rule``): the deliberately broken build the checks
must catch. It is installed here, in the worker's own composition of the
node, and nowhere else: no environment variable, setting or flag of a
shipped command can weaken the rule.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import logging
import os
import random
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from epochgc.config import Config, load_config, log_level_of
from epochgc.errors import LoopStoppedError
from epochgc.events import EventChannel
from epochgc.files import write_atomically
from epochgc.gc.daemon.scheduler import GcDaemon
from epochgc.ingest.producer import Producer
from epochgc.logging_setup import setup_logging
from epochgc.ownership.node_ownership import NodeOwnership
from epochgc.reconciler.node import ReconcilerNode
from epochgc.storage.keys import (
    l0_prefix,
    l1_prefix,
    nodes_prefix,
    parse_l0_key,
    partitions_prefix,
)
from epochgc.verify.faults import FaultPlan, FaultyStore
from epochgc.verify.switches import take_stall_switch
from epochgc.verify.unsafe_rule import unsafe_max_applied_rule
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.epoch import EpochCache
from epochgc.watermarks.partition.directory import LeaderDirectory
from epochgc.watermarks.safe_epoch.reports import SafeEpochRule, safe_epoch_rule
from epochgc.wiring.reconciler_process import build_node
from epochgc.wiring.settings import client_settings_of, daemon_settings_of
from epochgc.wiring.store import store_from_settings

log = logging.getLogger(__name__)


class _Lines:
    """An append-only JSON-lines file, flushed after every line."""

    def __init__(self, path: Path) -> None:
        self._file: TextIO = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, doc: dict[str, Any]) -> None:
        with self._lock:
            self._file.write(json.dumps(doc) + "\n")
            self._file.flush()


def stall_of(spec: str, root: str) -> tuple[str, Callable[[str, str], bool]]:
    """The store stall a ``stall-{id}`` switch asks for: ``"MODE LOOP"``,
    MODE ``hang`` or ``fail``, LOOP ``rounds`` (every request under the
    partitions' metadata: leading, housekeeping, reconciling) or
    ``ownership`` (the listing of the node leases each ownership round
    starts with; the lease heartbeat's own GET and PUT go on)."""
    mode, loop = spec.split()
    if mode not in ("hang", "fail") or loop not in ("rounds", "ownership"):
        raise ValueError(f"bad stall switch {spec!r}")
    if loop == "rounds":
        partitions = partitions_prefix(root)
        return mode, lambda _operation, key: key.startswith(partitions)
    nodes = nodes_prefix(root)
    return mode, lambda operation, key: operation == "ListObjectsV2" and key == nodes


def _watch(folder: Path, store: FaultyStore, ident: str, root: str, stop: threading.Event) -> None:
    """Follow the switches and publish the fault counts."""
    faults_path = folder / f"faults-{ident}.json"
    while not stop.wait(0.2):
        spec = take_stall_switch(folder, ident)
        if spec is not None:
            log.warning("%s: injecting a stalled loop: %s", ident, spec)
            store.stall = stall_of(spec, root)
        if (folder / "faults-off").exists():
            store.enabled = False
        lagging = (folder / "reconcile-lag").exists()
        store.slow_prefix = l1_prefix(root) if lagging else None
        store.slow_read_prefix = l0_prefix(root) if lagging else None
        write_atomically(faults_path, json.dumps(dict(store.injected)))


STALL_SECONDS = 15.0
"""A node none of whose rounds has ended (succeeded or failed) this long is
stuck: its tasks' and threads' stacks go to its log."""


def _node_status(node: ReconcilerNode, ownership: NodeOwnership) -> str:
    """One line: rounds so far and each led partition's leader state."""
    parts = []
    for service in node.led_services():
        state = service.leader.replica.state
        parts.append(
            f"{service.topic}/{service.partition} term {service.term} "
            f"{'open' if service.is_open else 'closed'} lro {state.lro} "
            f"next {state.next_offset} epochs {state.previous_applied_epoch}.."
            f"{state.max_applied_epoch} M(p) {state.safe_epoch}"
        )
    return (
        f"pid {os.getpid()} incarnation {ownership.lease.incarnation or '-'} "
        f"lease {'valid' if ownership.lease.is_valid() else 'not held'} "
        f"round {node.stats.rounds}, errors {node.stats.errors}, "
        f"owns {len(ownership.owned())}, "
        f"leading: {'; '.join(parts) or 'nothing'}"
    )


async def _watch_rounds(
    node: ReconcilerNode, ownership: NodeOwnership, stop: asyncio.Event
) -> None:
    """Log every task's and thread's stack once per stall, so a hung round
    shows where it waits without attaching a debugger to the process. A
    round that fails (the store's injected errors) still counts as one."""

    def ended() -> int:
        return node.stats.rounds + node.stats.round_failures

    seen, since, reported = ended(), time.monotonic(), False
    ticks = 0
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
        ticks += 1
        if ticks % 5 == 0 or ticks < 3:
            log.info("%s: %s", node.node_id, _node_status(node, ownership))
        if ended() != seen:
            seen, since, reported = ended(), time.monotonic(), False
            continue
        if reported or time.monotonic() - since < STALL_SECONDS:
            continue
        reported = True
        stacks = io.StringIO()
        for task in asyncio.all_tasks():
            print(f"--- task {task.get_name()}", file=stacks)
            task.print_stack(file=stacks)
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            print(f"--- thread {names.get(ident, ident)}", file=stacks)
            traceback.print_stack(frame, file=stacks)
        log.warning(
            "%s: no round ended for %.0fs; tasks and threads:\n%s",
            node.node_id,
            time.monotonic() - since,
            stacks.getvalue(),
        )


async def _run_node(
    config: Config,
    store: FaultyStore,
    ident: str,
    folder: Path,
    now: Callable[[], datetime],
    seed: int,
    rule: SafeEpochRule = safe_epoch_rule,
) -> None:
    directory = LeaderDirectory()
    node, ownership = build_node(config, store, ident, directory, now=now, safe_epoch_rule=rule)
    controller = Controller(store, config.layout.root)
    acks = _Lines(folder / f"acks-{ident}.jsonl")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    ownership.start()
    # The incarnation each topic is produced to: the revision of the led
    # partition the produce loop picked last. The producer binds a chunk to
    # ``revision_of(topic)`` (and floors its epoch there), so after a
    # delete-and-recreate this must follow the node to the new incarnation,
    # or every chunk would be bound to the deleted one and fail.
    revisions: dict[str, int] = {}

    def revision_of(topic: str) -> int:
        return revisions[topic]

    producer = Producer(
        store,
        config.layout.root,
        directory,
        EpochCache(controller.current_epoch, ttl_seconds=config.epoch.cache_ttl_seconds),
        revision_of,
        shards=config.layout.l0_shards,
        linger_seconds=0.05,
    )
    rng = random.Random(ident)
    sent = 0

    async def produce() -> None:
        nonlocal sent
        while not stop.is_set():
            await asyncio.sleep(0.05)
            if (folder / "producers-off").exists():
                continue
            led = [k for k in node.led_partitions() if directory.current(k.topic, k.partition)]
            if not led:
                continue
            pid = rng.choice(led)
            topic, partition = pid.topic, pid.partition
            if revisions.get(topic) != pid.revision:
                # A new incarnation (or the first produce): the node leads
                # it, so its controller view has it live.
                log.info("%s: producing to %s at revision %d", ident, topic, pid.revision)
                revisions[topic] = pid.revision
            tag = f"{ident}.{seed}@{pid.revision}"
            records = [f"{tag}:{sent + i}".encode() for i in range(5)]
            sent += len(records)
            try:
                offsets = await asyncio.wait_for(
                    producer.produce(topic, partition, records), timeout=20
                )
            except Exception as err:  # not acknowledged; the run goes on
                log.debug("produce to %s/%d not acknowledged: %s", topic, partition, err)
                continue
            for offset, record in zip(offsets, records, strict=True):
                acks.write(
                    {
                        "t": topic,
                        "rv": pid.revision,
                        "p": partition,
                        "o": offset,
                        "r": record.decode(),
                    }
                )

    producing = asyncio.create_task(produce())
    watchdog = asyncio.create_task(_watch_rounds(node, ownership, stop))
    try:
        await node.run(stop, round_interval_seconds=config.reconciler.round_interval_seconds)
    except LoopStoppedError:
        # Crash-only, as `epochgc reconciler` does: the node has let go and
        # logged its one line; a hung thread would hold up a normal exit.
        logging.shutdown()
        os._exit(1)
    finally:
        stop.set()
        for task in (producing, watchdog):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        ownership.stop(release=True)  # idempotent: node.run's stop released already


def _run_daemon(
    config: Config,
    store: FaultyStore,
    stats: Any,
    ident: str,
    folder: Path,
    now: Callable[[], datetime],
    events: EventChannel,
) -> None:
    daemon = GcDaemon(
        store,
        stats,
        config.layout.root,
        daemon_settings_of(config, node_id=ident, metrics_listen=""),
        now=now,
        events=events,
    )
    ms = _Lines(folder / f"m-{ident}.jsonl")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    daemon.start()
    try:
        while not stop.wait(0.2):
            current = daemon.collector.tracker.current
            if current is not None:
                ms.write({"t": time.time(), "m": current.safe_epoch, "pid": os.getpid()})
    finally:
        daemon.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--role", choices=["node", "daemon"], required=True)
    parser.add_argument("--id", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument(
        "--clock-skew", type=float, default=0.0, help="seconds added to this process's clock"
    )
    parser.add_argument(
        "--unsafe-test-build",
        action="store_true",
        help="the node publishes M(p) = max_applied_epoch - 1 (the checks must catch it)",
    )
    args = parser.parse_args(argv)
    skew = timedelta(seconds=args.clock_skew)

    def now() -> datetime:
        return datetime.now(UTC) + skew

    config = load_config(args.config)
    setup_logging(log_level_of(config))
    folder = Path(args.folder)
    events = EventChannel()  # the real and the injected SlowDowns reach the daemon's sweeper
    inner, stats = store_from_settings(config, client_settings_of(config), events=events)
    deletes = _Lines(folder / f"deletes-{args.id}.jsonl")
    root = config.layout.root

    def before_delete(keys: list[str]) -> None:
        now = time.time()
        for key in keys:
            parsed = parse_l0_key(key, root)
            deletes.write(
                {"t": now, "k": key, "e": parsed.epoch if parsed else None, "role": args.role}
            )

    store = FaultyStore(inner, FaultPlan(), args.seed, before_delete=before_delete, events=events)
    stop = threading.Event()
    watcher = threading.Thread(
        target=_watch, args=(folder, store, args.id, root, stop), daemon=True, name="verify-watch"
    )
    watcher.start()
    try:
        if args.role == "node":
            rule = unsafe_max_applied_rule if args.unsafe_test_build else safe_epoch_rule
            asyncio.run(_run_node(config, store, args.id, folder, now, args.seed, rule))
        else:
            _run_daemon(config, store, stats, args.id, folder, now, events)
    finally:
        stop.set()
    print(f"{args.id} stopped (pid {os.getpid()})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
