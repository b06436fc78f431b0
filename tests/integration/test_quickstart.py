"""The README's quickstart, run line by line as a user would type it.

The only liberty taken: the server's port. Port 9000 may be taken on the
machine running the tests, so the server gets a free port and every command
reaches it through the documented override ``EPOCHGC_STORE__ENDPOINT_URL``.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3

from tests.support.cli import REPO
from tests.support.servers import free_port

BEGIN, END = "<!-- quickstart:begin -->", "<!-- quickstart:end -->"


def quickstart_lines() -> list[str]:
    """The shell lines of the README's quickstart block, in order."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    return [
        line.strip()
        for line in block.splitlines()
        if line.strip() and not line.startswith(("```", "#"))
    ]


def test_the_readme_quickstart_runs_as_written() -> None:
    lines = quickstart_lines()
    assert lines[0].startswith("epochgc embedded-s3") and lines[0].endswith("&")
    assert lines[-1] == "kill %1", "the walkthrough ends by stopping the server it started"
    lines = lines[:-1]
    assert all(line.startswith("epochgc ") for line in lines)
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "EPOCHGC_STORE__ENDPOINT_URL": endpoint}

    def argv(line: str) -> list[str]:
        words = shlex.split(line.rstrip("&").strip())
        words = [str(port) if w == "9000" else w for w in words]
        return [sys.executable, "-m", "epochgc.cli", *words[1:]]

    server = subprocess.Popen(
        argv(lines[0]), cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _wait_for_port(port, server)
        outputs: dict[str, subprocess.CompletedProcess[str]] = {}
        for line in lines[1:]:
            done = subprocess.run(
                argv(line),
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stderr}"
            assert "Traceback" not in done.stderr, line
            outputs[line.split(" --config")[0]] = done
        bucket = _bucket_of(REPO / "config" / "local-server.toml")
        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="epochgc-embedded",
            aws_secret_access_key="epochgc-embedded-secret",
        )
        l0 = s3.list_objects_v2(Bucket=bucket, Prefix="epochgc/l0/").get("KeyCount", 0)
        runs = outputs["epochgc gc runs"].stdout
        assert "dry-run" in runs, runs
        # What each line prints is what the README says it does.
        produced = outputs["epochgc produce orders 0 --count 100"].stdout
        assert "100 records acknowledged" in produced and "read back identically" in produced
        reconciled = outputs["epochgc reconciler --duration 15"]
        assert "0 records reconciled" in reconciled.stdout
        info = [line for line in reconciled.stderr.splitlines() if " INFO " in line]
        assert len(info) <= 10, "a walkthrough's terminal, not a debug log:\n" + "\n".join(info)
        for line, done in outputs.items():
            if not line.startswith("epochgc reconciler"):  # one-shot: no INFO bookkeeping
                assert " INFO " not in done.stderr, f"{line}:\n{done.stderr}"
        deleted = [int(n) for n in re.findall(r"local\s+\d+\s+(\d+)", runs)]
        assert max(deleted) > 0, f"the walkthrough deleted nothing:\n{runs}"
        assert l0 == 0, f"{l0} L0 objects left after gc collect"
        server.terminate()  # kill %1
        assert server.wait(timeout=10) == 0
        assert server.stderr is not None and b"embedded S3 stopped" in server.stderr.read()
    finally:
        server.terminate()
        server.wait(timeout=10)


def _bucket_of(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    found = re.search(r'^bucket = "([^"]+)"', text, re.MULTILINE)
    assert found is not None
    return found.group(1)


def _wait_for_port(port: int, server: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read() if server.stderr else b""
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"the embedded S3 did not listen on {port}")
