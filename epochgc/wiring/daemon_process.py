"""Running the GC daemon as a process (``epochgc daemon``) until SIGTERM."""

from __future__ import annotations

import logging
import signal

from epochgc.config import Config
from epochgc.errors import DaemonFailedError
from epochgc.events import EventChannel
from epochgc.gc.daemon.scheduler import GcDaemon
from epochgc.metrics.instruments import CollectorRegistry
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.request_stats import RequestStats
from epochgc.wiring.settings import daemon_settings_of

log = logging.getLogger(__name__)


def run_daemon(
    config: Config,
    store: ObjectStore,
    stats: RequestStats,
    *,
    node_id: str | None = None,
    duration_seconds: float | None = None,
    registry: CollectorRegistry | None = None,
    events: EventChannel | None = None,
) -> GcDaemon:
    """Run the daemon until SIGTERM/SIGINT (or ``duration_seconds``, or a
    job's defect), then stop it cleanly: the batch in flight finishes, the
    lease is released. Must be called from the main thread (signal
    handlers). ``events``: the channel ``store`` publishes on
    (``StoreHandle.events``).

    Raises:
        DaemonFailedError: a job met a defect and ended the daemon (after
            the clean stop), so that the process exits non-zero.
    """
    daemon = GcDaemon(
        store,
        stats,
        config.layout.root,
        daemon_settings_of(config, node_id=node_id),
        registry=registry,
        events=events,
    )

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        daemon.done.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        daemon.start()
        daemon.done.wait(duration_seconds)
    finally:
        daemon.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if daemon.failure is not None:
        raise DaemonFailedError(f"gc daemon {daemon.node_id} stopped: {daemon.failure}")
    return daemon
