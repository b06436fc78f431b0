"""The metrics endpoint over real HTTP on a free loopback port."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from epochgc.metrics.instruments import GcMetrics, register_s3_requests
from epochgc.metrics.server import MetricsServer, parse_listen_address
from epochgc.storage.request_stats import RequestStats


@pytest.fixture
def served() -> Iterator[tuple[MetricsServer, GcMetrics, list[bool]]]:
    registry = CollectorRegistry()
    metrics = GcMetrics(registry)
    stats = RequestStats()
    stats._on_response("response-received.s3.DeleteObjects", response_dict={"status_code": 200})
    register_s3_requests(registry, stats)
    healthy = [True]
    server = MetricsServer(registry, "127.0.0.1:0", lambda: (healthy[0], {"state": "running"}))
    server.start()
    yield server, metrics, healthy
    server.stop()


def test_metrics_are_served_from_the_given_registry(
    served: tuple[MetricsServer, GcMetrics, list[bool]],
) -> None:
    server, metrics, _ = served
    metrics.safe_epoch.set(80)
    metrics.rounds.labels("collected").inc(3)
    metrics.set_state("paused")
    text = urllib.request.urlopen(f"{server.url}/metrics", timeout=5).read().decode()
    assert "epochgc_collector_safe_epoch 80.0" in text
    assert 'epochgc_collector_rounds_total{outcome="collected"} 3.0' in text
    assert 'epochgc_collector_state{state="paused"} 1.0' in text
    assert 'epochgc_collector_state{state="running"} 0.0' in text
    assert 'epochgc_s3_requests_total{operation="DeleteObjects",status="200"} 1.0' in text


def test_healthz_answers_503_when_unhealthy_and_404_elsewhere(
    served: tuple[MetricsServer, GcMetrics, list[bool]],
) -> None:
    server, _, healthy = served
    ok = urllib.request.urlopen(f"{server.url}/healthz", timeout=5)
    assert ok.status == 200 and json.loads(ok.read())["state"] == "running"
    healthy[0] = False
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{server.url}/healthz", timeout=5)
    assert err.value.code == 503 and json.loads(err.value.read())["healthy"] is False
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{server.url}/other", timeout=5)
    assert missing.value.code == 404


def test_listen_addresses() -> None:
    assert parse_listen_address("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen_address("[::1]:0") == ("::1", 0)
    for bad in ("9464", ":9464", "host:", "host:port"):
        with pytest.raises(ValueError):
            parse_listen_address(bad)


def test_a_server_starts_once() -> None:
    server = MetricsServer(CollectorRegistry(), "127.0.0.1:0", lambda: (True, {}))
    server.start()
    try:
        with pytest.raises(RuntimeError):
            server.start()
    finally:
        server.stop()
        server.stop()
