"""The simulation's S3 rate model (``bench/_rate_model.py``): which prefix a
request counts against, one-second windows of virtual time, the limits,
SlowDown as the product's S3 store reports it after its retries, peaks, and
latency on each caller's own timeline."""

from __future__ import annotations

import contextlib

import pytest

from bench._rate_model import (
    READ,
    WRITE,
    LaneExecutor,
    RateLimitedStore,
    RateModel,
    SlowDownAnswer,
    Timelines,
    key_prefix,
)
from epochgc.errors import NotFoundError, RetriesExhaustedError, TransientStorageError
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.storage.retry import RetryPolicy

NO_RETRY = RetryPolicy(max_attempts=1)


def limited(
    *,
    reads: int = 5_500,
    writes: int = 3_500,
    latency: float = 0.0,
    retry: RetryPolicy = NO_RETRY,
) -> tuple[VirtualClock, Timelines, MemoryStore, RateLimitedStore]:
    clock = VirtualClock()
    lanes = Timelines(clock)
    inner = MemoryStore(clock)
    model = RateModel(clock.monotonic(), read_limit=reads, write_limit=writes)
    store = RateLimitedStore(inner, lanes, model, latency_seconds=latency, retry=retry)
    return clock, lanes, inner, store


def test_an_object_request_counts_against_its_key_up_to_the_last_slash() -> None:
    assert key_prefix("epochgc/meta/owners/topic-03/7/12") == "epochgc/meta/owners/topic-03/7/"
    assert key_prefix("epochgc/meta/nodes/node-001") == "epochgc/meta/nodes/"
    assert key_prefix("top-level") == ""


def test_a_list_counts_against_its_prefix_argument_one_request_per_page() -> None:
    _clock, _lanes, inner, store = limited()
    for i in range(2_500):
        inner.put(f"root/owners/t/{i:05d}", b"x")
    for i in range(1_000):
        inner.put(f"root/nodes/n{i:04d}", b"x")
    assert sum(len(p) for p in store.list_pages("root/owners/")) == 2_500
    assert len(list(store.list_objects("root/nodes/"))) == 1_000  # exactly one full page
    assert list(store.list_pages("root/none/")) == []
    assert store.requests == {
        ("ListObjectsV2", "root/owners/"): 3,
        ("ListObjectsV2", "root/nodes/"): 1,
        ("ListObjectsV2", "root/none/"): 1,  # an empty listing is a request too
    }


def test_requests_are_counted_per_one_second_window_of_virtual_time() -> None:
    clock, _lanes, _inner, store = limited(writes=2)
    store.put("p/a", b"1")
    store.put("p/b", b"1")
    clock.advance(0.999)
    with pytest.raises(RetriesExhaustedError):
        store.put("p/c", b"1")  # still the first window
    clock.advance(0.001)
    store.put("p/c", b"1")  # a new window
    assert store.model.admitted[("p/", WRITE)] == {0: 2, 1: 1}
    assert store.model.offered[("p/", WRITE)] == {0: 3, 1: 1}


def test_beyond_the_limit_a_request_fails_as_the_s3_store_fails_after_its_retries() -> None:
    _clock, _lanes, inner, store = limited(writes=1)
    store.put_if_absent("p/a", b"1")
    with pytest.raises(RetriesExhaustedError) as raised:
        store.put_if_absent("p/b", b"1")
    assert isinstance(raised.value, TransientStorageError)
    assert isinstance(raised.value.last_error, SlowDownAnswer)
    assert "SlowDown" in str(raised.value)
    with pytest.raises(NotFoundError):
        inner.get("p/b")  # a write answered SlowDown is not applied
    assert store.slowdowns == {("PutObject", "p/"): 1}
    assert store.failed == {("PutObject", "p/"): 1}


def test_reads_and_writes_have_their_own_limits_and_each_prefix_its_own() -> None:
    _clock, _lanes, _inner, store = limited(reads=3, writes=1)
    store.put("p/a", b"1")
    store.put("q/a", b"1")  # another prefix: its own window
    store.get("p/a")
    store.head("p/a")
    with pytest.raises(NotFoundError):
        store.get("p/missing")  # a 404 is a request answered
    with pytest.raises(RetriesExhaustedError):
        list(store.list_pages("p/"))  # a LIST is a read of the prefix "p/"
    assert store.slowdowns == {("ListObjectsV2", "p/"): 1}
    with pytest.raises(RetriesExhaustedError):
        store.delete("p/a")
    store.get("q/a")


def test_a_retry_that_falls_into_the_next_window_succeeds() -> None:
    clock, lanes, inner, store = limited(
        writes=1, latency=0.4, retry=RetryPolicy(max_attempts=6, base_delay_seconds=0.05)
    )
    with lanes.acting("node-1"):
        store.put("p/a", b"1")  # t 0.0-0.4
        store.put("p/b", b"2")  # SlowDown at 0.4, 0.8 (+ backoffs), then admitted at >= 1.0
        assert lanes.monotonic() >= clock.monotonic() + 1.4
    assert inner.get("p/b").body == b"2"
    assert store.requests[("PutObject", "p/")] == 4
    assert store.slowdowns[("PutObject", "p/")] == 2
    assert not store.failed


def test_peaks_are_per_prefix_and_kind_busiest_first() -> None:
    clock, _lanes, _inner, store = limited(writes=3)
    for key in ("a/1", "a/2", "b/1"):
        store.put(key, b"x")
    clock.advance(1)
    for key in ("b/2", "b/3", "b/4", "b/5"):  # the fourth is answered SlowDown, still received
        with contextlib.suppress(RetriesExhaustedError):
            store.put(key, b"x")
    for _ in range(5):
        store.get("a/1")
    start = store.model.origin
    peaks = [(p.prefix, p.kind, p.requests, p.window) for p in store.model.peaks()]
    assert peaks == [("a/", READ, 5, 1), ("b/", WRITE, 4, 1), ("a/", WRITE, 2, 0)]
    first_second = store.model.peak(WRITE, since=start, until=start + 1)
    assert first_second is not None
    assert (first_second.prefix, first_second.requests) == ("a/", 2)
    assert store.model.peak(READ, since=start, until=start + 1) is None


def test_a_batch_delete_counts_each_key_against_its_prefix() -> None:
    _clock, _lanes, inner, store = limited(writes=3)
    for key in ("p/1", "p/2", "q/1", "p/3"):
        inner.put(key, b"x")
    outcome = store.delete_batch(["p/1", "p/2", "q/1"])
    assert set(outcome.deleted) == {"p/1", "p/2", "q/1"}
    refused = store.delete_batch(["p/3", "p/4"])  # p/ has room for one more only
    assert refused.failed == {"p/3": "SlowDown", "p/4": "SlowDown"}
    assert inner.head("p/3").size == 1
    assert store.model.admitted[("p/", WRITE)][0] == 2


def test_latency_spends_each_lanes_own_time() -> None:
    clock, lanes, inner, store = limited(latency=0.02)
    inner.put("p/a", b"x")
    start = clock.monotonic()
    with lanes.acting("node-1"):
        for _ in range(50):
            store.get("p/a")
        assert lanes.monotonic() == pytest.approx(start + 1.0)
        with lanes.acting("node-2"):
            store.get("p/a")
            assert lanes.monotonic() == pytest.approx(start + 0.02)
        assert lanes.now() > clock.now()
    assert lanes.monotonic() == clock.monotonic() == start  # outside: the simulation clock
    assert lanes.lane_time("node-1") == pytest.approx(start + 1.0)
    # node-1's requests ran from 0 to 1 s: 50 in the first window, none later
    assert store.model.offered[("p/", READ)] == {0: 51}
    clock.advance(2.0)
    with lanes.acting("node-1"):  # idle since: starts at the simulation clock
        store.get("p/a")
    assert store.model.offered[("p/", READ)] == {0: 51, 2: 1}


def test_requests_sent_side_by_side_take_one_latency_per_worker_round() -> None:
    clock, lanes, _inner, store = limited(latency=0.02)
    pool = LaneExecutor(lanes, "node-1/writes", workers=8)
    start = clock.monotonic()
    with lanes.acting("node-1"):
        store.put("p/first", b"x")  # 0.00-0.02 on the node's own lane

        def write(i: int) -> float:
            sent = lanes.monotonic()
            store.put(f"p/{i}", b"x")
            return sent

        sent = list(pool.map(write, range(10)))
        # eight workers start together after the first PUT; two go round again
        assert sent == pytest.approx([start + 0.02] * 8 + [start + 0.04] * 2)
        assert lanes.monotonic() == pytest.approx(start + 0.06)  # waited for the last
    assert store.requests[("PutObject", "p/")] == 11
