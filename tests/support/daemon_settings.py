"""The settings of a GC daemon in tests: quick rounds and control polls,
short leases, no minimum object age and no delete-fraction guard, no
ticker (a test moves the epoch itself)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from epochgc.gc.collection_round import CollectSettings
from epochgc.gc.collector import ScheduleSettings
from epochgc.gc.daemon.scheduler import DaemonSettings
from epochgc.leases.timing import LeasePolicy


def quick_daemon_settings(node_id: str, **overrides: Any) -> DaemonSettings:
    """``DaemonSettings`` for ``node_id``, quick as the module says, but
    for ``overrides``."""
    base: dict[str, Any] = {
        "node_id": node_id,
        "collect": CollectSettings(min_object_age=timedelta(0), max_delete_fraction=1.0),
        "schedule": ScheduleSettings(
            interval=timedelta(seconds=0.5),
            after_progress=timedelta(seconds=0.1),
            after_failure=timedelta(seconds=0.2),
            epoch_interval=timedelta(seconds=60),
        ),
        "lease": LeasePolicy(ttl_seconds=3.0, renew_interval_seconds=0.2, skew_margin_seconds=0.5),
        "control_poll_seconds": 0.2,
        "ticker": False,
    }
    return DaemonSettings(**(base | overrides))
