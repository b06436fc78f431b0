"""``epochgc verify``'s sampler records the published ``M`` as the
collectors would compute it at each sample, never held up by an earlier
one: check (d) must see a published ``M`` that went down."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from epochgc.storage.s3 import S3ObjectStore
from epochgc.verify.run import ROOT, _Sample, _sample_m
from epochgc.watermarks.controller import Controller
from epochgc.watermarks.safe_epoch.reports import (
    NodeReport,
    PartitionReport,
    publish_report,
)


def publish(store: S3ObjectStore, revision: int, safe_epoch: int) -> None:
    entry = PartitionReport("orders", revision, 0, 1, safe_epoch, 0, safe_epoch + 1, safe_epoch)
    publish_report(store, ROOT, NodeReport("node-1", datetime.now(UTC), (entry,)))


def wait_for(samples: list[_Sample], count: int) -> None:
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
    samples: list[_Sample] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_m, args=(store, samples, stop, tmp_path))
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
