"""``epochgc verify``'s sampler records the published ``M`` as the
collectors would compute it at each sample, never held up by an earlier
one: check (d) must see a published ``M`` that went down."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from epochgc.storage.s3 import S3ObjectStore
from epochgc.verify.run_config import ROOT
from epochgc.verify.sampler import Sample, sample_m
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    publish_report,
)
from tests.support.wrapping import StoreWrapper


def publish(store: S3ObjectStore, revision: int, safe_epoch: int) -> None:
    entry = PartitionReport("orders", revision, 0, 1, safe_epoch, 0, safe_epoch + 1, safe_epoch)
    publish_report(store, ROOT, NodeReport("node-1", datetime.now(UTC), (entry,)))


def wait_for(samples: list[Sample], count: int) -> None:
    deadline = time.monotonic() + 30
    while len(samples) < count:
        assert time.monotonic() < deadline, f"only {len(samples)} samples in 30 s"
        time.sleep(0.05)


def test_a_published_m_that_goes_down_is_recorded_as_it_is(
    store: S3ObjectStore, tmp_path: Path
) -> None:
    controller = Controller(store, ROOT)
    controller.tick()
    revision = controller.create_topic("orders", 1).revision
    for _ in range(8):
        controller.tick()
    publish(store, revision, 6)
    samples: list[Sample] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_m, args=(store, samples, stop, tmp_path))
    sampler.start()
    try:
        wait_for(samples, 1)
        publish(store, revision, 4)  # a broken build lowering M
        wait_for(samples, len(samples) + 2)
    finally:
        stop.set()
        sampler.join()
    published = [sample.published for sample in samples]
    assert published[0] == 6
    assert published[-1] == 4, published


class _Recording(StoreWrapper):
    """Notes every read in ``events``, after the sampler's clock readings."""

    def __init__(self, store: S3ObjectStore, events: list[str]) -> None:
        super().__init__(store)
        self.events = events

    def get(self, key: str, **kwargs: Any) -> Any:
        self.events.append("read")
        return self._store.get(key, **kwargs)

    def list_pages(self, prefix: str, **kwargs: Any) -> Any:
        self.events.append("read")
        return self._store.list_pages(prefix, **kwargs)


def test_a_sample_is_stamped_before_its_reads(store: S3ObjectStore, tmp_path: Path) -> None:
    """Check (b) pairs a deletion with the first sample stamped after it and
    trusts that sample's logged M to be at least the M of the deletion's
    moment. Only a sample whose reads all come after its stamp gives that
    bound: stamped after its reads (which take seconds on a loaded machine),
    it could carry an M read before the deletion (seed 12 of a soak: 48
    deletions flagged whose M the logs reached 0.7 s later)."""
    controller = Controller(store, ROOT)
    controller.tick()
    revision = controller.create_topic("orders", 1).revision
    publish(store, revision, 0)
    events: list[str] = []

    def clock() -> float:
        events.append("clock")
        return time.time()

    samples: list[Sample] = []
    stop = threading.Event()
    recording = _Recording(store, events)
    sampler = threading.Thread(
        target=sample_m, args=(recording, samples, stop, tmp_path), kwargs={"clock": clock}
    )
    sampler.start()
    try:
        wait_for(samples, 2)
    finally:
        stop.set()
        sampler.join()
    first_clock = events.index("clock")
    assert "read" not in events[:first_clock], events[: first_clock + 1]
