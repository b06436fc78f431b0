"""What an operator sees when the store is wrong, running the real CLI as a
separate process: one line naming the cause and exit 1, never a traceback,
never success on a bucket that is not there; ``check-store`` tells a missing
bucket or denied access apart from a missing feature; and every command that
writes refuses a store without the conditional-write semantics it needs
(one that answers 412 to every If-Match, emulated by a proxy), with the
probe table, while read-only commands still work there; a store that takes
only the bare ETag in If-Match (Ceph RGW 16) is used in that form."""

from __future__ import annotations

import json
import socket
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest

from epochgc.storage.embedded import EmbeddedS3
from tests.support.aws_env import clear_aws_credentials
from tests.support.cli import fatal_lines, run_cli
from tests.support.config_files import write_server_config
from tests.support.s3_proxy import (
    deny_everything,
    reject_every_if_match,
    rgw16_if_match,
    s3_fault_proxy,
)

FAST = (
    "max_attempts = 2\nbase_backoff_seconds = 0.001\nmax_backoff_seconds = 0.002\n"
    '[metrics]\nlisten = ""\n'
)
"""Appended to the ``[store]`` section: few, fast retries; no metrics port."""


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The bare ``epochgc: ...`` lines; no error reaches stderr as a log line."""
    assert " ERROR " not in done.stderr, done.stderr
    return fatal_lines(done)


@pytest.fixture
def missing_bucket_config(s3_server: EmbeddedS3, tmp_path: Path) -> Path:
    name = f"t-missing-{uuid.uuid4().hex[:8]}"
    return write_server_config(tmp_path / "missing.toml", s3_server.endpoint_url, name)


def test_gc_status_on_a_missing_bucket_exits_1_naming_it(missing_bucket_config: Path) -> None:
    done = run_cli("gc", "status", "--config", str(missing_bucket_config))
    assert done.returncode == 1, done.stdout
    [line] = error_lines(done)
    assert line.startswith("epochgc: bucket ") and "does not exist" in line
    assert "store.bucket" in line


def test_check_store_on_a_missing_bucket_says_so_not_missing_features(
    missing_bucket_config: Path,
) -> None:
    done = run_cli("check-store", "--config", str(missing_bucket_config))
    assert done.returncode == 1
    assert "NOT usable" not in done.stdout + done.stderr
    [line] = error_lines(done)
    assert "does not exist" in line


def test_check_store_with_access_denied_says_so(
    s3_server: EmbeddedS3, bucket: str, tmp_path: Path
) -> None:
    with s3_fault_proxy(s3_server.endpoint_url, deny_everything) as proxy:
        config = write_server_config(tmp_path / "denied.toml", proxy.endpoint, bucket)
        done = run_cli("check-store", "--config", str(config))
    assert done.returncode == 1
    assert "NOT usable" not in done.stdout + done.stderr
    [line] = error_lines(done)
    assert line.startswith("epochgc: access denied ") and "IAM" in line
    assert proxy.answered == 1, "access denied is not retried"


def test_gc_collect_without_credentials_says_so_at_once(
    s3_server: EmbeddedS3,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clear_aws_credentials(monkeypatch, tmp_path)
    config = tmp_path / "nocreds.toml"
    config.write_text(
        f'[store]\nbucket = "{bucket}"\nendpoint_url = "{s3_server.endpoint_url}"\n'
        'addressing_style = "path"\nmax_attempts = 6\nbase_backoff_seconds = 1.0\n'
        "max_backoff_seconds = 1.0\n"
    )
    done = run_cli("gc", "collect", "--config", str(config))
    assert done.returncode == 1
    [line] = error_lines(done)
    assert line.startswith("epochgc: no credentials found ")
    assert "retry" not in done.stderr.lower()


@pytest.mark.parametrize(
    "command",
    [
        ("gc", "collect"),
        ("produce", "orders", "0", "--create-partitions", "1", "--count", "1"),
        ("topic", "create", "orders", "--partitions", "1"),
        ("epoch", "tick"),
        ("gc", "pause", "--reason", "x"),
        ("daemon", "--duration", "2"),
        ("reconciler", "--duration", "2"),
    ],
)
def test_commands_that_write_refuse_a_store_that_rejects_its_own_etags(
    s3_server: EmbeddedS3, bucket: str, tmp_path: Path, command: tuple[str, ...]
) -> None:
    with s3_fault_proxy(s3_server.endpoint_url, reject_every_if_match) as proxy:
        config = write_server_config(tmp_path / "rgw.toml", proxy.endpoint, bucket, FAST)
        done = run_cli(*command, "--config", str(config))
    assert done.returncode == 1, done.stderr
    [line] = error_lines(done)
    assert bucket in line and "lacks what epochgc needs, refusing to write" in line
    assert "rejected (412) the ETag it had just returned" in done.stderr
    assert "store NOT usable" in done.stderr, "the probe table is shown"


def test_read_only_commands_still_work_on_such_a_store(
    s3_server: EmbeddedS3, bucket: str, tmp_path: Path
) -> None:
    with s3_fault_proxy(s3_server.endpoint_url, reject_every_if_match) as proxy:
        config = write_server_config(tmp_path / "rgw.toml", proxy.endpoint, bucket, FAST)
        done = run_cli("gc", "status", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert proxy.answered == 0


def test_commands_that_write_work_on_a_store_that_takes_only_the_bare_etag(
    s3_server: EmbeddedS3, bucket: str, tmp_path: Path
) -> None:
    with s3_fault_proxy(s3_server.endpoint_url, rgw16_if_match) as proxy:
        config = str(write_server_config(tmp_path / "rgw.toml", proxy.endpoint, bucket, FAST))
        report = run_cli("check-store", "--config", config, "--json")
        assert report.returncode == 0, report.stdout + report.stderr
        assert json.loads(report.stdout)["if_match_form"] == "bare"
        for command in (("topic", "create", "orders", "--partitions", "1"), ("epoch", "tick")):
            done = run_cli(*command, "--config", config)
            assert done.returncode == 0, done.stderr
            assert error_lines(done) == []


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", [("check-store",), ("gc", "collect")])
def test_an_unreachable_endpoint_is_one_line_not_a_table_of_failed_probes(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    config = write_server_config(tmp_path / "c.toml", endpoint, "bucket", FAST)
    done = run_cli(*command, "--config", str(config))
    assert done.returncode == 1
    [line] = error_lines(done)
    assert f"cannot reach the store at {endpoint}: connection refused" in line
    assert "store.endpoint_url" in line
    assert "FAIL" not in done.stdout + done.stderr, "no probe table"


def deny_pause_writes(
    method: str, path: str, _headers: Mapping[str, str]
) -> tuple[int, str] | None:
    """A bucket policy that lets these credentials probe the store but not
    write the GC control document (a read-only operator's)."""
    if method == "PUT" and path.split("?", maxsplit=1)[0].endswith("/gc/control.json"):
        return 403, "AccessDenied"
    return None


def test_a_refused_write_is_one_line_naming_operation_key_and_policy_section(
    s3_server: EmbeddedS3, bucket: str, tmp_path: Path
) -> None:
    with s3_fault_proxy(s3_server.endpoint_url, deny_pause_writes) as proxy:
        config = write_server_config(tmp_path / "denied.toml", proxy.endpoint, bucket, FAST)
        done = run_cli("gc", "pause", "--reason", "x", "--config", str(config))
    assert done.returncode == 1, done.stdout
    [line] = error_lines(done)
    told = [ln for ln in done.stderr.splitlines() if ln.strip() and " INFO " not in ln]
    assert told == [line], done.stderr
    assert line.startswith("epochgc: access denied ") and "PutObject" in line
    assert "key='epochgc/gc/control.json'" in line
    assert 'docs/operating.md, "Least privilege (IAM per process)"' in line
    assert proxy.answered == 1, "access denied is not retried"
