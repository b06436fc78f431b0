"""The metrics HTTP endpoint: ``/metrics`` (Prometheus text format from the
registry it is given) and ``/healthz`` (JSON; 200 when healthy, 503 when
not). A small server of our own rather than ``start_http_server`` because
that one answers every path with metrics and has no health endpoint.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from epochgc.errors import ConfigError
from epochgc.metrics.instruments import HealthCheck

log = logging.getLogger(__name__)


def parse_listen_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:port`` for IPv6) to a tuple.

    Raises:
        ValueError: not of that shape.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"expected host:port, got {address!r}")
    return host.strip("[]"), int(port)


class MetricsServer:
    """Serves ``/metrics`` and ``/healthz`` on a daemon thread.

    Example::

        server = MetricsServer(registry, "127.0.0.1:9464", health)
        server.start()
        print(server.url)   # http://127.0.0.1:9464
        server.stop()

    Port 0 picks a free port (``server.port`` tells which).
    """

    def __init__(self, registry: CollectorRegistry, address: str, health: HealthCheck) -> None:
        self._registry = registry
        self._host, self._port = parse_listen_address(address)
        self._health = health
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("metrics server not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def start(self) -> None:
        """Bind and serve.

        Raises:
            RuntimeError: already started.
            ConfigError: the address cannot be bound (in use, or not an
                address of this machine); names ``metrics.listen``.
        """
        if self._server is not None:
            raise RuntimeError("metrics server already started")
        registry, health = self._registry, self._health

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
                elif path == "/healthz":
                    healthy, details = health()
                    body = json.dumps({"healthy": healthy, **details}, default=str).encode()
                    self._send(200 if healthy else 503, "application/json", body)
                else:
                    self._send(404, "text/plain", b"not found: try /metrics or /healthz\n")

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("%s " + format, self.address_string(), *args)

        try:
            self._server = ThreadingHTTPServer((self._host, self._port), Handler)
        except OSError as err:
            raise ConfigError(
                "metrics.listen",
                f"{self._host}:{self._port}",
                f"cannot listen there: {err.strerror or err} "
                "(another process on that port? set [metrics] listen to a free one)",
            ) from err
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="epochgc-metrics", daemon=True
        )
        self._thread.start()
        # DEBUG: the start line of the process serving them names the URL.
        log.debug("serving /metrics and /healthz at %s", self.url)

    def stop(self) -> None:
        """Stop serving. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
