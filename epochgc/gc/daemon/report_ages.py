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
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime

from epochgc.gc.daemon.contacts import FAILED, StoreContacts
from epochgc.gc.future_times import FutureTimeLog
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.stored_time import find_future, stored_age_seconds
from epochgc.watermarks.safe_epoch.reports import read_reports

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ReportAges:
    """The ``reports`` job and the report ages it last saw.

    Example::

        ages = ReportAges(store, root, 120.0, contacts=contacts, ...)
        ages()          # reads the reports, warns about stale ones
        ages.ages()     # {"node-1": 4.2, ...}
    """

    store: ObjectStore
    root: str
    stale_after_seconds: float
    _: KW_ONLY
    margin_seconds: float
    contacts: StoreContacts
    future_log: FutureTimeLog
    now: Callable[[], datetime]
    _report_times: dict[str, datetime] = field(default_factory=dict, init=False)

    def __call__(self) -> None:
        read = self.contacts.attempt(
            "reports",
            lambda: read_reports(self.store, self.root),
            "could not read node reports: %s",
        )
        if read is FAILED:
            return
        reports, skipped = read
        if skipped:
            log.warning(
                "%d node reports could not be read and were skipped: %s",
                len(skipped),
                ", ".join(item.key for item in skipped[:10]),
            )
        self._report_times = {r.node: r.generated_at for r in reports}
        now = self.now()
        found = (
            find_future("report", r.node, "generated_at", r.generated_at, now, self.margin_seconds)
            for r in reports
        )
        self.future_log.note(f for f in found if f is not None)
        stale = sorted(n for n, age in self.ages().items() if age > self.stale_after_seconds)
        if stale:
            log.warning(
                "stale node reports (older than %.0fs): %s; M may be held back by them",
                self.stale_after_seconds,
                ", ".join(stale[:10]),
            )

    def ages(self) -> dict[str, float]:
        """Each node's report age in seconds, as of the last read (infinite:
        from the future, unknown)."""
        now = self.now()
        ages = {
            node: stored_age_seconds(at, now, self.margin_seconds)
            for node, at in self._report_times.items()
        }
        return {node: math.inf if age is None else age for node, age in ages.items()}
