"""Real Prometheus-family servers for the tests, from Debian's packages
(``make servers`` installs them), on free loopback ports."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} is not installed: run `make servers` (Debian packages)")
    return path


@contextmanager
def pushgateway() -> Iterator[str]:
    """A Pushgateway on a free port; yields its ``host:port``."""
    port = free_port()
    proc = subprocess.Popen(
        [_binary("prometheus-pushgateway"), f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = f"127.0.0.1:{port}"
    try:
        _wait_ready(f"http://{address}/-/ready", proc)
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before {url} was ready")
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    raise RuntimeError(f"{url} not ready within {timeout}s")
