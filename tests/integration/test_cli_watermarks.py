"""The topic, epoch, partition and embedded-s3 commands, run as processes."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from epochgc.storage.embedded import EmbeddedS3
from tests.support.cli import REPO, run_cli, start_cli
from tests.support.config_files import write_server_config


def write_config(tmp_path: Path, endpoint: str, bucket: str) -> Path:
    return write_server_config(tmp_path / "cli.toml", endpoint, bucket)


def test_topic_epoch_and_partition_commands(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str
) -> None:
    config = str(write_config(tmp_path, s3_server.endpoint_url, bucket))
    assert run_cli("epoch", "tick", "--config", config).returncode == 0
    created = run_cli(
        "topic", "create", "orders", "--partitions", "2", "--config", config, "--json"
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout) == {"topic": "orders", "partitions": 2, "revision": 2}
    duplicate = run_cli("topic", "create", "orders", "--partitions", "2", "--config", config)
    assert duplicate.returncode == 1 and "already exists" in duplicate.stderr
    bad = run_cli("topic", "create", "a/b", "--partitions", "2", "--config", config)
    assert bad.returncode == 1 and "invalid topic name" in bad.stderr
    assert "Traceback" not in bad.stderr
    listed = json.loads(run_cli("topic", "list", "--config", config, "--json").stdout)
    assert listed["topics"] == [{"topic": "orders", "partitions": 2, "revision": 2}]
    assert json.loads(run_cli("epoch", "show", "--config", config, "--json").stdout) == {
        "cluster_epoch": 2
    }
    refused = run_cli("epoch", "advance", "--to", "2", "--config", config)
    assert refused.returncode == 1 and "already 2" in refused.stderr
    shown = json.loads(
        run_cli("partition", "show", "orders", "1", "--config", config, "--json").stdout
    )
    assert shown["safe_epoch"] == 1 and shown["max_applied_epoch"] == 2
    compacted = run_cli("partition", "compact", "orders", "1", "--config", config, "--json")
    assert compacted.returncode == 0, compacted.stderr
    assert json.loads(compacted.stdout)["truncated"] == 0
    missing = run_cli("partition", "show", "orders", "7", "--config", config)
    assert missing.returncode == 1 and "partitions 0..1" in missing.stderr
    other = run_cli("topic", "delete", "orders", "--revision", "7", "--config", config)
    assert other.returncode == 1
    assert "orders@7 is not live (orders@2 is); nothing done" in other.stderr
    deleted = run_cli("topic", "delete", "orders", "--revision", "2", "--config", config)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "deleted orders@2 at offset 3"
    assert json.loads(run_cli("topic", "list", "--config", config, "--json").stdout)["topics"] == []


def test_embedded_s3_command_serves_until_sigterm(tmp_path: Path) -> None:
    proc = start_cli(
        "embedded-s3", "--port", "0", "--config", str(REPO / "config" / "local-server.toml")
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        endpoint = first.strip().rsplit(" ", 1)[-1]
        assert endpoint.startswith("http://127.0.0.1:"), first
        config = str(write_config(tmp_path, endpoint, "epochgc"))
        probe = run_cli("check-store", "--config", config)
        assert probe.returncode == 0, probe.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
