"""bench/latency_proxy.py: forwards requests and answers byte-exact (fixed
length and chunked bodies, keep-alive connections), adds its delay to every
request without serialising concurrent ones, and counts requests by kind
from the request line."""

from __future__ import annotations

import http.client
import json
import os
import socketserver
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest

from bench.latency_proxy import LatencyProxy, request_kind
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3


class _Echo(socketserver.StreamRequestHandler):
    """Answers every request with its own decoded body, chunked when the
    request was chunked; keeps the connection open (HTTP/1.1)."""

    def handle(self) -> None:
        while True:
            request_line = self.rfile.readline()
            if not request_line:
                return
            headers = {}
            while (line := self.rfile.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            chunked = headers.get("transfer-encoding") == "chunked"
            if chunked:
                body = b""
                while (size := int(self.rfile.readline().split(b";")[0], 16)) > 0:
                    body += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
                self.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for i in range(0, len(body), 7000):
                    piece = body[i : i + 7000]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            else:
                body = self.rfile.read(int(headers.get("content-length", "0")))
                self.wfile.write(
                    f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
                )


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    request_queue_size = 64  # the default 5 drops SYNs of 10 parallel connects (1 s retry)


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = _EchoServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _connection(endpoint: str) -> http.client.HTTPConnection:
    parts = urlsplit(endpoint)
    return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)


def test_bodies_are_forwarded_byte_exact_both_ways_on_one_kept_alive_connection(
    echo_server: str,
) -> None:
    proxy = LatencyProxy(echo_server, delay=0.0)
    payload = os.urandom(150_000) + b"\r\n0\r\n\r\n"  # framing-like bytes inside the body
    with proxy.running_in_thread() as endpoint:
        conn = _connection(endpoint)
        conn.request("PUT", "/bucket/key", body=payload)
        assert conn.getresponse().read() == payload
        # Chunked request (and chunked answer) on the same connection.
        pieces = iter([payload[:1], payload[1:99_999], payload[99_999:]])
        conn.request("PUT", "/bucket/key2", body=pieces, encode_chunked=True)
        response = conn.getresponse()
        assert response.getheader("Transfer-Encoding") == "chunked"
        assert response.read() == payload
        conn.request("PUT", "/bucket/key3", body=b"")
        assert conn.getresponse().read() == b""
        conn.close()
    assert proxy.stats.by_kind["PUT"] == 3


def test_every_request_is_delayed_and_concurrent_delays_overlap(echo_server: str) -> None:
    delay = 0.2
    proxy = LatencyProxy(echo_server, delay=delay)
    with proxy.running_in_thread() as endpoint:

        def one(_i: int) -> float:
            conn = _connection(endpoint)
            started = time.perf_counter()
            conn.request("GET", "/bucket/key")
            conn.getresponse().read()
            conn.close()
            return time.perf_counter() - started

        sequential = [one(i) for i in range(3)]
        started = time.perf_counter()
        with ThreadPoolExecutor(10) as pool:
            concurrent = list(pool.map(one, range(10)))
        overlapped = time.perf_counter() - started
    assert min(sequential) >= delay
    assert min(concurrent) >= delay
    assert overlapped < 3 * delay  # ten requests in flight, not ten delays in a row


def test_s3_requests_are_counted_by_kind() -> None:
    with EmbeddedS3(bucket="proxy-counts") as s3:
        proxy = LatencyProxy(s3.endpoint_url, delay=0.001)
        with proxy.running_in_thread() as endpoint:
            settings = s3.client_settings()
            client = make_s3_client(type(settings)(**{**vars(settings), "endpoint_url": endpoint}))
            body = os.urandom(70_000)
            for i in range(3):
                client.put_object(Bucket="proxy-counts", Key=f"k/{i}", Body=body)
            assert client.get_object(Bucket="proxy-counts", Key="k/0")["Body"].read() == body
            client.head_object(Bucket="proxy-counts", Key="k/0")
            pages = client.get_paginator("list_objects_v2").paginate(
                Bucket="proxy-counts", Prefix="k/", PaginationConfig={"PageSize": 2}
            )
            assert sum(len(p["Contents"]) for p in pages) == 3
            client.list_objects(Bucket="proxy-counts")
            client.delete_objects(
                Bucket="proxy-counts", Delete={"Objects": [{"Key": "k/0"}, {"Key": "k/1"}]}
            )
            client.delete_object(Bucket="proxy-counts", Key="k/2")
            client.get_bucket_location(Bucket="proxy-counts")
            conn = _connection(endpoint)
            conn.request("GET", "/__latency_proxy__/stats")
            stats = json.loads(conn.getresponse().read())
            conn.close()
    assert stats["by_kind"] == {
        "PUT": 3,
        "GET": 1,
        "HEAD": 1,
        "LIST": 3,
        "DeleteObjects": 1,
        "DELETE": 1,
        "OTHER": 1,
    }
    assert stats["by_status"]["LIST 2xx"] == 3
    assert stats["first_at"] <= stats["last_at"]


@pytest.mark.parametrize(
    ("method", "target", "kind"),
    [
        ("GET", "/b?list-type=2&prefix=epochgc%2Fl0%2F&start-after=x", "LIST"),
        ("GET", "/b/?prefix=a&delimiter=%2F&marker=m", "LIST"),
        ("GET", "/b", "LIST"),
        ("GET", "/b?location", "OTHER"),
        ("GET", "/b?versions", "OTHER"),
        ("GET", "/", "OTHER"),
        ("POST", "/b?delete", "DeleteObjects"),
        ("POST", "/b?delete=", "DeleteObjects"),
        ("DELETE", "/b/epochgc/l0/000/x", "DELETE"),
        ("DELETE", "/b/k?x-id=DeleteObject", "DELETE"),
        ("DELETE", "/b", "OTHER"),
        ("GET", "/b/k", "GET"),
        ("GET", "/b/k?acl", "OTHER"),
        ("PUT", "/b/k", "PUT"),
        ("HEAD", "/b/k", "HEAD"),
    ],
)
def test_request_kind(method: str, target: str, kind: str) -> None:
    assert request_kind(method, target) == kind
