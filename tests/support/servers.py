"""Real Prometheus-family servers for the tests, from Debian's packages
(``make servers`` installs them), on free loopback ports."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
def pushgateway(folder: Path) -> Iterator[str]:
    """A Pushgateway on a free port, persisting into ``folder`` (the Debian
    binary's default is a file under /var/lib, which a test must not touch);
    yields its ``host:port``."""
    address = f"127.0.0.1:{free_port()}"
    argv = [
        _binary("prometheus-pushgateway"),
        f"--web.listen-address={address}",
        f"--persistence.file={folder / 'pushgateway.data'}",
    ]
    with _serving(argv, f"http://{address}/-/ready", ready_within=20.0, stop_within=10.0):
        yield address


@contextmanager
def _serving(
    argv: list[str], ready_url: str, *, ready_within: float, stop_within: float
) -> Iterator[None]:
    """``argv`` running (its output discarded) from once ``ready_url``
    answers 200 until the block ends; then terminated."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(ready_url, proc, timeout=ready_within)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=stop_within)


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


@contextmanager
def prometheus(
    targets: list[str], folder: Path, *, job: str = "epochgc", rules: Path | None = None
) -> Iterator[str]:
    """A Prometheus scraping ``targets`` (host:port) every second as scrape
    job ``job``, evaluating ``rules`` (an alert rules file) every second;
    yields its base URL. Its state stays under ``folder``."""
    port = free_port()
    config = folder / "prometheus.yml"
    rule_files = f"rule_files: [{str(rules)!r}]\n" if rules is not None else ""
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        + rule_files
        + f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n"
        f"      - targets: [{', '.join(repr(t) for t in targets)}]\n"
    )
    argv = [
        _binary("prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={folder / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    url = f"http://127.0.0.1:{port}"
    with _serving(argv, f"{url}/-/ready", ready_within=30.0, stop_within=15.0):
        yield url


def query(url: str, promql: str) -> list[tuple[dict[str, str], float]]:
    """An instant PromQL query: (labels, value) per series."""
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=5
    ) as answer:
        body = json.loads(answer.read())
    if body.get("status") != "success":
        raise RuntimeError(f"query {promql!r} failed: {body}")
    return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]
