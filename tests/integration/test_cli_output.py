"""What the CLI prints for people: quiet stderr, headers, plurals, --json
wherever a command prints data."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import epochgc
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.s3 import S3ObjectStore
from tests.support.cli import REPO, run_cli
from tests.support.config_files import write_gc_config, write_server_config


def test_config_show_takes_json(tmp_path: Path) -> None:
    done = run_cli("config", "show", "--json", "--config", "config/local.toml")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["store"]["embedded"] is True


def test_commands_print_no_info_line_about_the_store_on_stderr(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    config = write_server_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)
    done = run_cli("topic", "list", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "object store:" not in done.stderr
    assert done.stderr == ""


def test_one_partition_is_singular_and_gc_runs_has_a_header(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    config = write_server_config(
        tmp_path / "c.toml",
        s3_server.endpoint_url,
        bucket,
        "[gc]\nmin_object_age_seconds = 0\n",
    )
    created = run_cli("topic", "create", "solo", "--partitions", "1", "--config", str(config))
    assert created.returncode == 0, created.stderr
    assert "1 partition," in created.stdout and "1 partitions" not in created.stdout
    assert run_cli("gc", "collect", "--config", str(config)).returncode == 0
    runs = run_cli("gc", "runs", "--config", str(config))
    assert runs.returncode == 0, runs.stderr
    header, first = runs.stdout.splitlines()[:2]
    assert header.split()[:3] == ["run", "engine", "M"], header
    assert first.split()[1] == "local"


def test_version_prints_the_one_version_and_touches_no_store() -> None:
    """The version lives in ``epochgc/__init__.py`` only: the package
    metadata (pyproject's dynamic version) and ``--version`` read it."""
    done = run_cli("--version", env={"EPOCHGC_STORE__ENDPOINT_URL": "http://127.0.0.1:9"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"epochgc {epochgc.__version__}"
    assert importlib.metadata.version("epochgc") == epochgc.__version__
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert not re.search(r'^version\s*=\s*"', pyproject, re.M), "a second version"


def test_a_missing_config_file_names_the_file_and_where_to_look() -> None:
    done = run_cli("gc", "status", "--config", "nope.toml")
    assert done.returncode == 2
    line = done.stderr.strip()
    assert line.endswith(
        "nope.toml: file not found (run from the folder it is in, or give its path)"
    )
    assert ": -:" not in line


def test_an_unknown_option_shows_the_subcommands_usage_not_the_top_level() -> None:
    done = run_cli("gc", "collect", "--dryrun", "--config", "config/local.toml")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: epochgc gc collect"), done.stderr
    assert "unrecognized arguments: --dryrun" in done.stderr


def test_a_run_line_lists_the_skip_reasons_as_words_not_a_python_dict(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    config = write_server_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)
    done = run_cli("gc", "collect", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "{" not in done.stdout and "'" not in done.stdout, done.stdout
    assert "skipped: none" in done.stdout  # an empty bucket: nothing listed, nothing kept


def test_a_one_shot_command_shows_warnings_and_progress_only_unless_verbose() -> None:
    """The quickstart's one-shot commands printed about ten INFO lines each
    (the embedded server, leases, the store); they now print what they did
    and nothing else unless -v; long-running processes keep INFO."""
    quiet = run_cli("topic", "list", "--config", "config/local.toml")
    assert quiet.returncode == 0, quiet.stderr
    assert " INFO " not in quiet.stderr, quiet.stderr
    loud = run_cli("topic", "list", "-v", "--config", "config/local.toml")
    assert loud.returncode == 0 and "INFO    epochgc.storage.embedded" in loud.stderr
    chosen = run_cli("topic", "list", "--config", "config/local.toml", "--log-level", "INFO")
    assert "INFO    epochgc.storage.embedded" in chosen.stderr


def test_a_run_line_says_when_listed_stops_short_of_every_object(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    """'listed 11' with 12 objects in the bucket read as a bug: with the
    guard off each shard's listing stops at its first key above M, and the
    line now says so; a guarded round counts every object and does not."""
    note = "(each shard up to its first key above M)"
    unguarded = write_gc_config(tmp_path / "off.toml", s3_server.endpoint_url, bucket)
    done = run_cli("gc", "collect", "--config", str(unguarded))
    assert done.returncode == 0 and note in done.stdout, done.stdout + done.stderr
    guarded = write_server_config(tmp_path / "on.toml", s3_server.endpoint_url, bucket)
    counted = run_cli("gc", "collect", "--config", str(guarded))
    assert counted.returncode == 0 and note not in counted.stdout, counted.stdout


def test_config_example_takes_its_folder_as_an_argument_and_offers_only_what_it_uses(
    tmp_path: Path,
) -> None:
    done = run_cli("config", "example", str(tmp_path / "cfg"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cfg" / "default.toml").is_file()
    usage = run_cli("config", "example", "--help").stdout
    assert "--config" not in usage and "--json" not in usage, usage


def test_the_common_options_work_before_the_command_too(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    config = write_server_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)
    before = run_cli("--config", str(config), "--json", "topic", "list")
    after = run_cli("topic", "list", "--config", str(config), "--json")
    assert before.returncode == 0, before.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)
    status = run_cli("--config", str(config), "gc", "status")
    assert status.returncode == 0, status.stderr
    both = run_cli("--config", "a.toml", "topic", "list", "--config", str(config))
    assert both.returncode == 2 and "--config" in both.stderr, both.stderr


def test_demo_help_names_its_own_settings_and_its_default_duration() -> None:
    usage = " ".join(run_cli("demo", "--help").stdout.split())
    assert "built-in defaults + environment" not in usage, usage
    assert "demo settings" in usage and "default: 60" in usage, usage


def test_produce_leads_only_the_partition_it_writes(
    tmp_path: Path, s3_server: EmbeddedS3, bucket: str, store: S3ObjectStore
) -> None:
    config = write_server_config(tmp_path / "c.toml", s3_server.endpoint_url, bucket)
    created = run_cli("topic", "create", "orders", "--partitions", "2", "--config", str(config))
    assert created.returncode == 0, created.stderr
    done = run_cli("produce", "orders", "1", "--count", "3", "--config", str(config), "-v")
    assert done.returncode == 0, done.stderr
    assert sorted(set(re.findall(r"leading (orders/\d)", done.stderr))) == ["orders/1"], done.stderr
