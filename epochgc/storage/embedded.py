"""An S3 server inside this process, for the default run, the demo and tests.

It is moto's server mode: a real HTTP endpoint on 127.0.0.1 that boto3 talks
to exactly as it talks to AWS, with S3's conditional-write semantics. Nothing
leaves the machine and no credentials are needed (any static pair works).
State lives in memory and is gone when the process exits.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from epochgc.storage.client import ClientSettings, make_s3_client

log = logging.getLogger("epochgc.storage.embedded")

EMBEDDED_ACCESS_KEY = "epochgc-embedded"
EMBEDDED_SECRET_KEY = "epochgc-embedded-secret"  # noqa: S105 - not a secret: moto accepts any pair


class EmbeddedS3:
    """Start/stop an in-process S3 endpoint and create a bucket in it.

    Example::

        with EmbeddedS3(bucket="epochgc") as s3:
            client = make_s3_client(s3.client_settings())

    Args:
        bucket: created on start (if not ``None``).
        host: the address to bind; loopback by default so nothing outside
            this machine can reach it.
        port: 0 picks a free port.
    """

    def __init__(
        self, *, bucket: str | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._bucket = bucket
        self._host = host
        self._port = port
        self._server: object | None = None
        self._endpoint: str | None = None
        self._lock = threading.Lock()

    @property
    def endpoint_url(self) -> str:
        """``http://host:port`` of the running server."""
        if self._endpoint is None:
            raise RuntimeError("embedded S3 is not running; call start() first")
        return self._endpoint

    def client_settings(self) -> ClientSettings:
        """Client settings that reach this server."""
        return ClientSettings(
            endpoint_url=self.endpoint_url,
            region="us-east-1",
            access_key_id=EMBEDDED_ACCESS_KEY,
            secret_access_key=EMBEDDED_SECRET_KEY,
            addressing_style="path",
        )

    def start(self) -> str:
        """Start the server (and create the bucket); return the endpoint URL.

        Raises:
            RuntimeError: already started.
        """
        # Imported here: moto is heavy and only the embedded mode needs it.
        from moto.server import ThreadedMotoServer  # noqa: PLC0415

        with self._lock:
            if self._server is not None:
                raise RuntimeError("embedded S3 already started")
            logging.getLogger("werkzeug").setLevel(logging.ERROR)
            server = ThreadedMotoServer(ip_address=self._host, port=self._port, verbose=False)
            server.start()
            host, port = server.get_host_and_port()
            self._server = server
            self._endpoint = f"http://{host}:{port}"
        log.info("embedded S3 listening on %s", self._endpoint)
        if self._bucket is not None:
            self.create_bucket(self._bucket)
        return self._endpoint

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` if it does not exist yet."""
        client = make_s3_client(self.client_settings())
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)

    def stop(self) -> None:
        """Stop the server; safe to call more than once."""
        with self._lock:
            server, self._server = self._server, None
            self._endpoint = None
        if server is not None:
            server.stop()  # type: ignore[attr-defined]
            log.info("embedded S3 stopped")

    def __enter__(self) -> EmbeddedS3:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
