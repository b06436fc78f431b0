"""``M`` as an ``epochgc verify`` run watches it: sampled twice a second
while the run is disturbed, as published (the join of the node reports,
what the collectors act on) and as the partition logs give it
(``truth.py``), on the same controller view. The checks judge the samples
after the run; the sampler only takes them, on a clean store.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from epochgc.errors import EpochGCError
from epochgc.storage.s3 import S3ObjectStore
from epochgc.verify.run_config import ROOT
from epochgc.verify.truth import LogFollower, logged_safe_epoch
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.aggregate import join_safe_epoch
from epochgc.watermarks.safe_epoch.reports import read_reports


@dataclass(frozen=True)
class Sample:
    """One sample of ``M``: as the collectors would compute it from the
    reports (``published``), and as the partition logs give it, read just
    after the reports on the same controller view (``logged``)."""

    t: float
    published: int
    logged: int


def sample_m(
    store: S3ObjectStore,
    samples: list[Sample],
    stop: threading.Event,
    folder: Path,
    clock: Callable[[], float] = time.time,
) -> None:
    """``M`` twice a second, published and logged (``truth.py``), each
    sample with the partitions that pinned them and the controller offset
    its view was at into ``sampled-m.jsonl`` (where a drop comes from, and
    which entries the view had folded).

    A sample is stamped *before* its reads: the logs' ``M`` it finds is then
    at least the true ``M`` of its stamp (``M`` only grows), which is the
    bound check (b) rests on. Stamped after them, a sample whose reads took
    seconds could carry an ``M`` read before a deletion stamped earlier."""
    controller = Controller(store, ROOT)
    follower = LogFollower(store, ROOT)
    with (folder / "sampled-m.jsonl").open("a", encoding="utf-8") as out:
        while not stop.wait(0.5):
            now = clock()
            try:
                view = controller.snapshot()
                reports, _skipped = read_reports(store, ROOT)
                # The raw join, never held up by an earlier sample: check (d)
                # must see a published M that went down.
                published = join_safe_epoch(view, reports)
                logged = logged_safe_epoch(view, follower.safe_epochs(view))
            except EpochGCError:
                continue  # a store hiccup or a log mid-truncation: the next sample will do
            samples.append(Sample(now, published.safe_epoch, logged.safe_epoch))
            pinning = [
                [w.topic, w.revision, w.partition, w.safe_epoch, w.node] for w in published.pinning
            ]
            sample = {
                "t": now,
                "m": published.safe_epoch,
                "logged_m": logged.safe_epoch,
                "offset": published.controller_offset,
                "pinning": pinning,
                "logged_pinning": [[p.topic, p.revision, p.partition] for p in logged.pinning],
            }
            out.write(json.dumps(sample) + "\n")
            out.flush()
