"""What a reconciler process shows and how it ends: the metrics of its
nodes, its ``/healthz`` answer, and the backstop that exits the process
when a loop of the node stopped and the node cannot get there itself (its
event loop blocked). The process itself is assembled in
``wiring.reconciler_process``.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

from epochgc.events import Subscriber
from epochgc.metrics.instruments import (
    CollectorRegistry,
    ReconcilerMetrics,
)
from epochgc.periodic import PeriodicThread
from epochgc.reconciler.node import ReconcilerNode, ReconcilerRoundEnded
from epochgc.reconciler.node_samples import sample_node

log = logging.getLogger(__name__)


class NodeMetrics:
    """The metrics of the reconciler nodes of one process, on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.nodes: list[ReconcilerNode] = []
        self._metrics = ReconcilerMetrics(
            registry, lambda: [sample_node(node) for node in list(self.nodes)]
        )

    def round_observer(self, node_id: str) -> Subscriber[ReconcilerRoundEnded]:
        """The subscriber that puts ``node_id``'s rounds into the
        round-duration histogram. Its series exists from this call on, so a
        scrape before the first round ends already shows it (at zero)."""
        histogram = self._metrics.round_duration.labels(node_id)

        def observe(event: ReconcilerRoundEnded) -> None:
            histogram.observe(event.seconds)

        return observe


def reconciler_health(
    node: ReconcilerNode, ticker_held: Callable[[], bool]
) -> tuple[bool, dict[str, object]]:
    """``/healthz`` of a reconciler process: healthy while every loop of
    the node completes rounds; otherwise 503 with ``loop`` and ``reason``
    (``loop LOOP stopped: CAUSE``), until the process exits."""
    details: dict[str, object] = {
        "node": node.node_id,
        "led_partitions": len(node.led_partitions()),
        "ticker": ticker_held(),
    }
    stall = node.stall()
    if stall is None:
        return True, details
    reason = stall.describe()
    return False, {**details, "loop": stall.loop, "reason": reason, "reasons": [reason]}


class StallBackstop:
    """Exits the process if the node has not got there itself ``grace_seconds``
    after one of its loops was judged stopped: its event loop may be
    blocked (a loop that hangs without awaiting), and then only a thread
    can. Logs the node's one line (once, whoever logs it first), the main
    thread's stack at DEBUG, then calls ``exit_process``.

    Example::

        backstop = StallBackstop(node, os_exit, grace_seconds=30.0)
        backstop.start()
        ...
        backstop.stop()
    """

    def __init__(
        self,
        node: ReconcilerNode,
        exit_process: Callable[[], object],
        *,
        grace_seconds: float,
        poll_seconds: float = 0.25,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._node = node
        self._exit = exit_process
        self._grace = grace_seconds
        self._monotonic = monotonic
        self._seen_at: float | None = None
        self._fired = False
        self._thread = PeriodicThread("stall-backstop", poll_seconds, self._check)

    def start(self) -> None:
        """Start watching.

        Raises:
            RuntimeError: already started.
        """
        self._thread.start()

    def stop(self) -> None:
        """Stop watching; idempotent."""
        self._thread.stop()

    def _check(self) -> None:
        if self._fired:
            return  # only a test's exit returns
        stall = self._node.stall()
        if stall is None:
            return
        now = self._monotonic()
        self._seen_at = now if self._seen_at is None else self._seen_at
        if now - self._seen_at < self._grace:
            return
        main = sys._current_frames().get(threading.main_thread().ident or 0)
        stack = "".join(traceback.format_stack(main)) if main is not None else ""
        self._node.announce_stall(stall, stack)
        log.warning(
            "node %s did not stop within %.0fs of its loop %s stopping: exiting now",
            self._node.node_id,
            self._grace,
            stall.loop,
        )
        self._fired = True
        self._exit()
