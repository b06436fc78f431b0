"""Benchmark helper: reconciler nodes as real ``epochgc reconciler``
processes, one per node, against one S3 endpoint.

Why processes: nodes as threads of one interpreter share its GIL, so a
node's ownership round waits for CPU the others hold, which no deployment
has; and a "kill -9" of a thread is a flag the thread agrees to obey. Here
every node is the product's own command with its own interpreter, a node
is killed with a real ``SIGKILL``, and the nodes' clocks, threads and
request counters are their own.

Each node runs ``python -m epochgc.cli reconciler --node-id ID --config
FILE --duration CAP`` with this checkout on ``PYTHONPATH`` (not an
installed ``epochgc``), its ``/metrics`` on a port of its own
(``EPOCHGC_METRICS__LISTEN``: the exact S3 request counts of the node,
``epochgc_s3_requests_total``) and its log in a file of its own. The node
binds port 0 and the bench reads the port it got from the node's log: a
port picked by the bench and bound later by the node could be taken by
another process in between (it was, once: "Address already in use"). The
``--duration`` is a backstop: a node outlives a bench that was itself
killed by at most that long.

Example::

    with NodeProcesses(config_path, workdir, duration_seconds=600) as procs:
        procs.start([f"node-{i:02d}" for i in range(20)])
        procs.kill("node-03")          # SIGKILL
    # every node still running: SIGTERM, then SIGKILL after a grace period
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from epochgc.wiring.interrupts import sigterm_as_interrupt

log = logging.getLogger("epochgc.bench")

REPO_ROOT = Path(__file__).resolve().parents[1]
"""This checkout: the nodes import its ``epochgc``, whatever is installed."""

_SERVING = re.compile(r"serving /metrics and /healthz at http://[^ ]*:(?P<port>[0-9]+)")
"""The node's log line naming where its metrics server listens."""

_REQUESTS = re.compile(
    r'^epochgc_s3_requests_total\{operation="(?P<op>[^"]+)",status="(?P<status>[^"]*)"\} '
    r"(?P<count>[0-9.e+]+)$"
)


@dataclass(frozen=True)
class NodeConfig:
    """What the bench writes into the nodes' one configuration file."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str
    bucket: str
    root: str
    ttl_seconds: float
    renew_seconds: float
    skew_margin_seconds: float
    ownership_round_seconds: float
    max_moves: int
    reconciler_round_seconds: float
    report_seconds: float
    reconcile_concurrency: int = 4
    max_round_seconds: float = 600.0
    """A node whose rounds loop completes no round this long exits 1
    (``[reconciler] max_round_seconds``; default 4 TTLs, 60 s). Here a
    node's first round opens its 100 partitions while 19 others open
    theirs on the one embedded server, which serves them all in over a
    minute: at 60 s every node exited in the middle of leading."""

    def toml(self) -> str:
        """The file's text: the store, the product's lease and round
        timings as given, idle partitions kept idle (no housekeeping
        appends), no epoch ticker (no controller writes), metrics set per
        process by the environment."""
        return f"""# written by bench_ownership for one run
[store]
bucket = "{self.bucket}"
endpoint_url = "{self.endpoint_url}"
region = "us-east-1"
access_key_id = "{self.access_key_id}"
secret_access_key = "{self.secret_access_key}"
addressing_style = "path"
if_match_form = "quoted"

[layout]
root = "{self.root}"

[epoch]
ticker = false

[lease]
ttl_seconds = {self.ttl_seconds}
renew_interval_seconds = {self.renew_seconds}
skew_margin_seconds = {self.skew_margin_seconds}

[ownership]
round_interval_seconds = {self.ownership_round_seconds}
max_moves_per_round = {self.max_moves}

[reconciler]
round_interval_seconds = {self.reconciler_round_seconds}
idle_interval_seconds = 86400.0
reconcile_concurrency = {self.reconcile_concurrency}
max_round_seconds = {self.max_round_seconds}

[reports]
interval_seconds = {self.report_seconds}

[metrics]
listen = ""

[logging]
level = "INFO"
"""

    def write(self, path: Path) -> Path:
        path.write_text(self.toml(), encoding="utf-8")
        return path


@dataclass
class NodeProcess:
    """One node: its id, process, log file and (once it has said so in
    its log) metrics port."""

    node_id: str
    process: subprocess.Popen[bytes]
    log_path: Path
    killed_at: float | None = None
    """Wall time (``time.time()``) of our SIGKILL, if we sent one."""
    _metrics_port: int | None = None

    @property
    def metrics_port(self) -> int:
        """The port the node's metrics server bound, from its log.

        Raises:
            ConnectionRefusedError: the node has not logged it yet (an
                ``OSError``, as a port not yet listening would give).
        """
        if self._metrics_port is None:
            try:
                text = self.log_path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            found = _SERVING.search(text)
            if found is None:
                raise ConnectionRefusedError(f"{self.node_id} has not logged its metrics port")
            self._metrics_port = int(found.group("port"))
        return self._metrics_port

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def requests(self, timeout: float = 5.0) -> dict[str, int]:
        """The node's S3 requests so far by operation (every status), from
        its ``/metrics``: the counts of its own client, exact."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            text = answer.read().decode()
        counts: dict[str, int] = {}
        for line in text.splitlines():
            found = _REQUESTS.match(line)
            if found is not None:
                op = found.group("op")
                counts[op] = counts.get(op, 0) + int(float(found.group("count")))
        return counts

    def last_lines(self, count: int = 5) -> list[str]:
        """The end of the node's log (for a node that died on its own)."""
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []
        return lines[-count:]


@dataclass
class NodeProcesses:
    """Starts, kills and always cleans up the node processes of one run.

    Leaving the ``with`` block (normally, on an error or on Ctrl-C; SIGTERM
    to the bench is turned into the same path while inside) sends SIGTERM
    to every node still running, so it steps down and releases what it
    owns, then SIGKILL to any that has not exited after ``grace_seconds``.
    """

    config_path: Path
    workdir: Path
    duration_seconds: float
    grace_seconds: float = 20.0
    nodes: dict[str, NodeProcess] = field(default_factory=dict)
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)
    """Other children (the busy neighbour): SIGKILLed on exit."""
    _sigterm: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def __enter__(self) -> NodeProcesses:
        self._sigterm.enter_context(sigterm_as_interrupt())
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.stop_all()
        finally:
            self._sigterm.close()

    def start(self, node_ids: Iterable[str], env: Mapping[str, str] | None = None) -> None:
        """Launch one process per node id, as fast as they can be spawned."""
        base = dict(os.environ if env is None else env)
        base["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), base.get("PYTHONPATH", "")) if p
        )
        base["EPOCHGC_METRICS__LISTEN"] = "127.0.0.1:0"  # the node logs the port it got
        for node_id in node_ids:
            log_path = self.workdir / f"{node_id}.log"
            with log_path.open("wb") as out:
                process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "epochgc.cli",
                        "reconciler",
                        "--node-id",
                        node_id,
                        "--config",
                        str(self.config_path),
                        "--duration",
                        f"{self.duration_seconds:g}",
                    ],
                    env=base,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=self.workdir,
                    start_new_session=True,  # a Ctrl-C reaches the bench, which stops them
                )
            self.nodes[node_id] = NodeProcess(node_id, process, log_path)

    def live(self) -> list[NodeProcess]:
        """Nodes whose process runs (a node we killed is not live)."""
        return [n for n in self.nodes.values() if n.alive()]

    def died_on_their_own(self) -> list[NodeProcess]:
        """Nodes that exited without our SIGKILL (a failure of the run)."""
        return [n for n in self.nodes.values() if not n.alive() and n.killed_at is None]

    def kill(self, node: NodeProcess) -> float:
        """``kill -9`` of ``node``; the wall time of the kill."""
        os.kill(node.pid, signal.SIGKILL)
        node.killed_at = time.time()
        node.process.wait(timeout=10)
        return node.killed_at

    def requests(self) -> dict[str, dict[str, int]]:
        """Every live node's request counts by operation."""
        return {n.node_id: n.requests() for n in self.live()}

    def busy_neighbour(self) -> subprocess.Popen[bytes]:
        """A process spinning on core 0 (when this machine lets it be
        pinned): a neighbour that takes a whole core from the nodes."""
        code = (
            "import os\n"
            "if hasattr(os, 'sched_setaffinity') and 0 in os.sched_getaffinity(0):\n"
            "    os.sched_setaffinity(0, {0})\n"
            "while True:\n"
            "    pass\n"
        )
        spinner = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.extra.append(spinner)
        return spinner

    def stop_extra(self) -> None:
        for process in self.extra:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
        self.extra.clear()

    def stop_all(self) -> None:
        """SIGTERM every node still running (it releases what it owns),
        SIGKILL the ones still there after ``grace_seconds``."""
        self.stop_extra()
        running = self.live()
        for node in running:
            with contextlib.suppress(ProcessLookupError):
                node.process.terminate()
        deadline = time.monotonic() + self.grace_seconds
        for node in running:
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("node %s did not stop on SIGTERM: SIGKILL", node.node_id)
                node.process.kill()
                node.process.wait(timeout=10)
