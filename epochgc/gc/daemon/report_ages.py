"""How old each node's report is, as this daemon sees it: the ``reports``
job (every daemon, leader or standby) and the ages the metrics read at
scrape time (``epochgc_collector_report_age_seconds{node}``).

A report older than ``report_stale_seconds`` is logged: its node may hold
``M`` back. A ``generated_at`` from the future (the writer's clock ahead of
this one by more than the skew margin) is of unknown age and counts as
stale (infinite), so the stale-report alert fires beside the clock-skew one
instead of never.

Invariants: ages are measured on the wall clock the daemon is given; the
reports are read only by the job, never at scrape time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import datetime

from epochgc.errors import EpochGCError
from epochgc.gc.daemon.contacts import StoreContacts
from epochgc.gc.future_times import FutureTimeLog
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.stored_time import find_future, stored_age_seconds
from epochgc.watermarks.safe_epoch.reports import read_reports

log = logging.getLogger("epochgc.gc.daemon")  # the daemon's log lines keep their logger


class ReportAges:
    """The ``reports`` job and the report ages it last saw.

    Example::

        ages = ReportAges(store, root, 120.0, contacts=contacts, ...)
        ages()          # reads the reports, warns about stale ones
        ages.ages()     # {"node-1": 4.2, ...}
    """

    def __init__(
        self,
        store: ObjectStore,
        root: str,
        stale_after_seconds: float,
        *,
        margin_seconds: float,
        contacts: StoreContacts,
        future_log: FutureTimeLog,
        now: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._root = root
        self._stale_after = stale_after_seconds
        self._margin = margin_seconds
        self._contacts = contacts
        self._future_log = future_log
        self._now = now
        self._report_times: dict[str, datetime] = {}

    def __call__(self) -> None:
        try:
            reports, skipped = read_reports(self._store, self._root)
        except EpochGCError as err:
            self._contacts.record("reports", err)
            log.warning("could not read node reports: %s", err)
            return
        self._contacts.record("reports")
        if skipped:
            log.warning(
                "%d node reports could not be read and were skipped: %s",
                len(skipped),
                ", ".join(item.key for item in skipped[:10]),
            )
        self._report_times = {r.node: r.generated_at for r in reports}
        now = self._now()
        found = (
            find_future("report", r.node, "generated_at", r.generated_at, now, self._margin)
            for r in reports
        )
        self._future_log.note(f for f in found if f is not None)
        stale = sorted(n for n, age in self.ages().items() if age > self._stale_after)
        if stale:
            log.warning(
                "stale node reports (older than %.0fs): %s; M may be held back by them",
                self._stale_after,
                ", ".join(stale[:10]),
            )

    def ages(self) -> dict[str, float]:
        """Each node's report age in seconds, as of the last read (infinite:
        from the future, unknown)."""
        now = self._now()
        ages = {
            node: stored_age_seconds(at, now, self._margin)
            for node, at in self._report_times.items()
        }
        return {node: math.inf if age is None else age for node, age in ages.items()}
