"""Benchmark helper: an HTTP proxy in front of the embedded S3 that adds a
fixed delay to every request and counts requests by kind.

Why a proxy rather than a client hook: ``bench_sweep`` measures epochgc
against tools that are not Python (rclone) or not ours (s3cmd, awscli).
Only something on the wire gives every contender the same latency, and
only the wire sees every request each of them makes, whatever its client
library counts. So every contender, epochgc included, talks to this proxy.

What it does, per client connection (keep-alive is kept: one upstream
connection per client connection, opened on first use and again after
the server closes it):

1. read the request head and body (``Content-Length`` or chunked; a chunked
   body is forwarded byte for byte, framing included);
2. wait ``delay`` seconds (``asyncio.sleep``: delays of concurrent
   requests overlap, as round trips of parallel connections do on S3);
3. forward the request, read the response (``Content-Length``, chunked, or
   until the server closes) and return it unchanged.

Requests are counted from the request line (path-style addressing):
``LIST`` (GET on a bucket without a sub-resource: ListObjects v1/v2),
``DeleteObjects`` (POST ``?delete``), ``DELETE``, ``GET``, ``PUT``,
``HEAD`` and ``OTHER`` (bucket location, ListBuckets, ...), each with its
response status class. ``GET /__latency_proxy__/stats`` answers the counts
as JSON and ``POST /__latency_proxy__/reset`` clears them; neither is
forwarded or counted (no bucket name can start with ``_``).

Run as its own process (so its work never competes with the embedded
server for an interpreter lock)::

    python -m bench.latency_proxy --upstream http://127.0.0.1:5000 --delay-ms 20

It prints ``listening on http://127.0.0.1:PORT`` once ready.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

CONTROL_PREFIX = "/__latency_proxy__/"

KINDS = ("LIST", "DeleteObjects", "DELETE", "GET", "PUT", "HEAD", "OTHER")

_BUCKET_LISTING_PARAMS = frozenset(
    {
        "list-type",
        "prefix",
        "delimiter",
        "marker",
        "max-keys",
        "continuation-token",
        "start-after",
        "encoding-type",
        "fetch-owner",
        "x-id",
    }
)


def request_kind(method: str, target: str) -> str:
    """The kind of an S3 request (path-style) from its request line.

    A GET on ``/bucket`` whose query holds only listing parameters is a
    LIST; any other query key on a bucket (``?location``, ``?versioning``,
    ``?uploads``, ...) is a sub-resource and counts as OTHER, as does a
    request on ``/`` (ListBuckets).
    """
    parts = urlsplit(target)
    path = parts.path.lstrip("/")
    bucket, _, key = path.partition("/")
    query = {name for name, _ in parse_qsl(parts.query, keep_blank_values=True)}
    if not bucket:
        return "OTHER"
    if not key:
        if method == "GET" and query <= _BUCKET_LISTING_PARAMS:
            return "LIST"
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        return "OTHER"
    if method in ("GET", "PUT", "DELETE", "HEAD") and not (query - {"x-id"}):
        return method
    return "OTHER"


@dataclass
class ProxyStats:
    """What went through the proxy since the last reset.

    ``first_at``/``last_at`` are ``time.time()`` stamps of the first request
    received and the last response sent: the span a contender kept the
    server busy, without its own start-up time.
    """

    by_kind: Counter[str] = field(default_factory=Counter)
    by_status: Counter[str] = field(default_factory=Counter)
    first_at: float | None = None
    last_at: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "by_kind": dict(self.by_kind),
            "by_status": dict(self.by_status),
            "first_at": self.first_at,
            "last_at": self.last_at,
        }


class _Closed(Exception):
    """The peer closed the connection between requests."""


class LatencyProxy:
    """Forwards HTTP/1.1 to ``upstream`` with ``delay`` seconds added per request.

    Example::

        proxy = LatencyProxy("http://127.0.0.1:5000", delay=0.02)
        with proxy.running_in_thread() as endpoint:
            client = boto3.client("s3", endpoint_url=endpoint, ...)
        proxy.stats.by_kind["LIST"]
    """

    def __init__(self, upstream: str, delay: float, *, host: str = "127.0.0.1") -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._delay = delay
        self._host = host
        self.stats = ProxyStats()
        self._server: asyncio.base_events.Server | None = None

    async def start(self, port: int = 0) -> str:
        """Listen; return the endpoint URL."""
        self._server = await asyncio.start_server(self._serve, self._host, port, limit=1 << 20)
        bound = self._server.sockets[0].getsockname()[1]
        return f"http://{self._host}:{bound}"

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    @contextlib.contextmanager
    def running_in_thread(self) -> Iterator[str]:
        """Run the proxy on an event loop in a daemon thread (tests); yields
        the endpoint, then stops the server and its connections."""
        loop = asyncio.new_event_loop()
        started = threading.Event()
        box: dict[str, Any] = {}

        async def main() -> None:
            try:
                box["endpoint"] = await self.start()
            finally:
                box["stop"] = asyncio.Event()
                started.set()
            await box["stop"].wait()
            assert self._server is not None
            self._server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
        thread.start()
        started.wait(timeout=10)
        try:
            if "endpoint" not in box:
                raise RuntimeError("latency proxy did not start")
            yield box["endpoint"]
        finally:
            loop.call_soon_threadsafe(box["stop"].set)
            thread.join(timeout=10)
            loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    head = await _read_head(reader)
                except _Closed:
                    return
                method, target, headers = _parse_head(head)
                if headers.get("expect", "").lower() == "100-continue":
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    await writer.drain()
                body = await _read_body(reader, headers, request=True, method=method)
                if target.startswith(CONTROL_PREFIX):
                    await self._control(method, target, writer)
                    continue
                now = time.time()
                if self.stats.first_at is None:
                    self.stats.first_at = now
                kind = request_kind(method, target)
                self.stats.by_kind[kind] += 1
                await asyncio.sleep(self._delay)
                if upstream is None or upstream[0].at_eof():
                    upstream = await asyncio.open_connection(*self._upstream, limit=1 << 20)
                up_reader, up_writer = upstream
                up_writer.write(head + body)
                await up_writer.drain()
                response_head = await _read_head(up_reader)
                status, response_headers = _parse_status(response_head)
                while 100 <= status < 200:  # interim (100 Continue): already answered
                    response_head = await _read_head(up_reader)
                    status, response_headers = _parse_status(response_head)
                response_body = await _read_body(
                    up_reader, response_headers, request=False, method=method, status=status
                )
                writer.write(response_head + response_body)
                await writer.drain()
                self.stats.by_status[f"{kind} {status // 100}xx"] += 1
                self.stats.last_at = time.time()
                if _closes(response_headers) or _closes(headers):
                    up_writer.close()
                    upstream = None
                if _closes(headers) or response_headers.get("x-proxy-until-eof"):
                    return  # the client reads to EOF too, or asked to close
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if upstream is not None:
                upstream[1].close()
            writer.close()

    async def _control(self, method: str, target: str, writer: asyncio.StreamWriter) -> None:
        if target == CONTROL_PREFIX + "reset" and method == "POST":
            self.stats = ProxyStats()
        data = json.dumps(self.stats.as_json()).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as err:
        if not err.partial.strip():
            raise _Closed from err
        raise
    return head


def _header_map(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.rstrip(b"\r\n").split(b"\r\n")
    method, target, _version = lines[0].decode("latin-1").split(" ", 2)
    return method, target, _header_map(lines[1:])


def _parse_status(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.rstrip(b"\r\n").split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    return status, _header_map(lines[1:])


def _closes(headers: dict[str, str]) -> bool:
    return "close" in headers.get("connection", "").lower()


async def _read_body(
    reader: asyncio.StreamReader,
    headers: dict[str, str],
    *,
    request: bool,
    method: str,
    status: int = 200,
) -> bytes:
    """The raw body bytes (chunk framing and trailers included, so the
    forwarded message is byte-exact)."""
    if not request and (method == "HEAD" or status in (204, 304) or 100 <= status < 200):
        return b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked(reader)
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if request:
        return b""
    # The body ends when the server closes: so must the client's copy.
    headers["connection"] = "close"
    headers["x-proxy-until-eof"] = "1"
    return await reader.read()


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        parts.append(size_line)
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            break
        parts.append(await reader.readexactly(size + 2))
    while True:  # trailers, then the empty line
        line = await reader.readuntil(b"\r\n")
        parts.append(line)
        if line == b"\r\n":
            return b"".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()

    async def run() -> None:
        proxy = LatencyProxy(args.upstream, args.delay_ms / 1000)
        endpoint = await proxy.start(args.port)
        print(f"listening on {endpoint}", flush=True)
        await proxy.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
