"""Test-only: an HTTP proxy in front of the embedded S3 that answers chosen
requests itself, so a separate ``epochgc`` process can be pointed at a store
that misbehaves the way real ones do (an ``endpoint_url`` is all it takes).

Every request a rule lets through is forwarded unchanged to the real server
and its answer returned unchanged; a rule's answer is a real S3 error
document, so botocore parses it exactly as it would a real store's.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

Rule = Callable[[str, str, Mapping[str, str]], tuple[int, str] | None]
"""(method, path, headers) -> (status, S3 error code) to answer, or None."""

Rewrite = Callable[[str, str, dict[str, str]], dict[str, str]]
"""(method, path, headers) -> the headers to forward instead."""

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}


def rgw16_if_match(method: str, _path: str, headers: Mapping[str, str]) -> tuple[int, str] | None:
    """Ceph RGW 16.2: a PUT whose ``If-Match`` carries the ETag in quotes, as
    the store itself returned it, is answered 412; the bare ETag is
    forwarded and honoured (DigitalOcean Spaces behaves the same)."""
    if method == "PUT" and headers.get("If-Match", "").startswith('"'):
        return 412, "PreconditionFailed"
    return None


def reject_every_if_match(
    method: str, _path: str, headers: Mapping[str, str]
) -> tuple[int, str] | None:
    """A store that answers 412 to every ``If-Match`` PUT, whatever the form
    of the ETag: leases could never be renewed there."""
    if method == "PUT" and "If-Match" in headers:
        return 412, "PreconditionFailed"
    return None


def drop_bare_if_match(method: str, _path: str, headers: dict[str, str]) -> dict[str, str]:
    """With ``rgw16_if_match``: a store that rejects the quoted ETag and
    silently ignores the bare one (forwards the PUT without its condition),
    so a stale bare ETag would overwrite."""
    if method == "PUT" and not headers.get("If-Match", '"').startswith('"'):
        return {k: v for k, v in headers.items() if k != "If-Match"}
    return headers


def deny_everything(_method: str, _path: str, _headers: Mapping[str, str]) -> tuple[int, str]:
    """A bucket policy that denies these credentials every request."""
    return 403, "AccessDenied"


class S3FaultProxy:
    """Forwards to ``upstream`` except where ``rule`` answers.

    Example::

        with s3_fault_proxy(server.endpoint, rgw16_if_match) as proxy:
            write_server_config(path, proxy.endpoint, bucket)
    """

    def __init__(self, upstream: str, rule: Rule, rewrite: Rewrite | None = None) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._rule = rule
        self._rewrite = rewrite
        self._lock = threading.Lock()
        self.answered = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length", "0") or "0")
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items()}
                answer = proxy._rule(self.command, self.path, headers)
                if answer is not None:
                    with proxy._lock:
                        proxy.answered += 1
                    self._reply_error(*answer)
                    return
                if proxy._rewrite is not None:
                    headers = proxy._rewrite(self.command, self.path, headers)
                conn = http.client.HTTPConnection(*proxy._upstream, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                    self.send_response(response.status, response.reason)
                    for name, value in response.getheaders():
                        if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            def _reply_error(self, status: int, code: str) -> None:
                data = (
                    f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
                    f"<Message>proxy answered {code}</Message><RequestId>proxy</RequestId>"
                    "</Error>"
                ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def s3_fault_proxy(
    upstream: str, rule: Rule, rewrite: Rewrite | None = None
) -> Iterator[S3FaultProxy]:
    proxy = S3FaultProxy(upstream, rule, rewrite)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
