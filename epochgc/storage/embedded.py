"""An S3 server inside this process, for the default run, the demo and tests.

It is moto's server mode: a real HTTP endpoint on 127.0.0.1 that boto3 talks
to exactly as it talks to AWS, with S3's conditional-write semantics. Nothing
leaves the machine and no credentials are needed (any static pair works).
State lives in memory and is gone when the process exits.
"""

from __future__ import annotations

import errno
import logging
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from epochgc.errors import EmbeddedServerError
from epochgc.extras import EMBEDDED, require
from epochgc.storage.bucket_settings import ABORT_INCOMPLETE_UPLOADS
from epochgc.storage.client import ClientSettings, make_s3_client

log = logging.getLogger(__name__)

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
        in_process: serve from a thread of this process (the default: no
            extra process to manage), or from a child process, which does
            not compete with this process for the GIL (benchmarks).
    """

    def __init__(
        self,
        *,
        bucket: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        in_process: bool = True,
    ) -> None:
        self._bucket = bucket
        self._host = host
        self._port = port
        self._in_process = in_process
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
            EmbeddedServerError: the port is taken.
        """
        with self._lock:
            if self._server is not None:
                raise RuntimeError("embedded S3 already started")
            if self._in_process:
                self._server, self._endpoint = self._start_thread()
            else:
                self._server, self._endpoint = self._start_process()
        log.info("embedded S3 listening on %s", self._endpoint)
        if self._bucket is not None:
            try:
                self.create_bucket(self._bucket)
            except BaseException:
                self.stop()  # never leave a server running behind a failed start
                raise
        return self._endpoint

    def _start_thread(self) -> tuple[object, str]:
        """Bind the port here, then serve moto's app on that very socket
        from a thread: a busy port fails at once with a clear error (moto's
        own threaded server waits forever for a thread that died binding),
        and port 0 reports the port actually bound."""
        # Imported here: moto is heavy, an extra, and only the embedded mode needs it.
        moto_server = require("moto.server", EMBEDDED, "the embedded S3")
        from werkzeug.serving import make_server  # noqa: PLC0415 - moto's dependency

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        listener = bind_listener(self._host, self._port)
        port = listener.getsockname()[1]
        try:
            server = make_server(
                self._host,
                port,
                AtomicConditionalWrites(
                    moto_server.DomainDispatcherApplication(moto_server.create_backend_app)
                ),
                threaded=True,
                fd=listener.fileno(),
            )
        finally:
            listener.close()  # the server holds its own duplicate of the socket
        # A tenth of a second between looks at the shutdown flag: a stop
        # waits at most that long for the serving loop (the default is half
        # a second, which every stop of a test's or the CLI's server paid).
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="embedded-s3",
            daemon=True,
        )
        thread.start()
        return _ThreadServer(server, thread), f"http://{self._host}:{port}"

    def _start_process(self) -> tuple[object, str]:
        require("moto.server", EMBEDDED, "the embedded S3")
        port = self._port or _free_port(self._host)
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "epochgc.storage.embedded", self._host, str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection((self._host, port), timeout=0.5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    raise RuntimeError(
                        f"embedded S3 process did not start on port {port}"
                    ) from None
                time.sleep(0.1)
        return process, f"http://{self._host}:{port}"

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` if it does not exist yet, set up as
        docs/operating.md ("Bucket settings") recommends: unversioned, with
        a rule that aborts incomplete multipart uploads."""
        client = make_s3_client(self.client_settings())
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)
            client.put_bucket_lifecycle_configuration(
                Bucket=bucket,
                LifecycleConfiguration={"Rules": [ABORT_INCOMPLETE_UPLOADS]},
            )

    def stop(self) -> None:
        """Stop the server; safe to call more than once."""
        with self._lock:
            server, self._server = self._server, None
            self._endpoint = None
        if isinstance(server, subprocess.Popen):
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
            log.info("embedded S3 process stopped")
        elif server is not None:
            server.stop()  # type: ignore[attr-defined]
            log.info("embedded S3 stopped")

    def __enter__(self) -> EmbeddedS3:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class AtomicConditionalWrites:
    """WSGI middleware that applies conditional writes one at a time.

    moto checks a write's precondition (``If-None-Match: *``, ``If-Match``)
    and then stores the object, as two steps with no lock between them: two
    writers racing on one key can both pass the check and both win, which
    S3 never allows and every lease and log of epochgc relies on (seen once
    in a full test run on a loaded machine, in the store probes' create-only
    race). Running PUTs and POSTs that carry a precondition under one lock
    makes each atomic against the others; unconditional writes and reads
    are not held up.
    """

    def __init__(self, app: Any) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        conditional = "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ
        if not conditional or environ.get("REQUEST_METHOD") not in ("PUT", "POST"):
            return self._app(environ, start_response)
        with self._lock:
            # The whole answer is produced inside the lock: the write is
            # applied while the response is generated, not when it is called.
            return list(self._app(environ, start_response))


class _ThreadServer:
    """The embedded server's WSGI server and the thread serving it."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: any free port).

    Raises:
        EmbeddedServerError: the port is taken (or the address cannot be bound).
    """
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(128)
    except OSError as err:
        listener.close()
        if err.errno == errno.EADDRINUSE:
            raise EmbeddedServerError(
                f"port {port} on {host} is already in use (another server, e.g. MinIO's "
                "default 9000): pick another with --port, or stop what holds it"
            ) from err
        raise EmbeddedServerError(f"cannot listen on {host}:{port}: {err.strerror}") from err
    return listener


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _serve_in_this_process(host: str, port: int) -> None:
    """The child of ``in_process=False``: the same server (with its atomic
    conditional writes) on ``host:port`` until the parent terminates it."""
    server = EmbeddedS3(host=host, port=port)
    server.start()
    threading.Event().wait()


if __name__ == "__main__":
    _serve_in_this_process(sys.argv[1], int(sys.argv[2]))
