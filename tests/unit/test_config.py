"""Configuration loading, overrides and validation."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from epochgc.config import Config, LeaseConfig, load_config
from epochgc.errors import ConfigError
from epochgc.wiring.settings import daemon_settings_of

REPO = Path(__file__).resolve().parents[2]


def test_default_toml_spells_out_exactly_the_built_in_defaults() -> None:
    on_disk = tomllib.loads((REPO / "config" / "default.toml").read_text())
    built_in = {
        section.name: dataclasses.asdict(getattr(Config(), section.name))
        for section in dataclasses.fields(Config)
    }
    assert on_disk == built_in


def test_local_toml_uses_the_embedded_store() -> None:
    config = load_config(REPO / "config" / "local.toml", env={})
    assert config.store.embedded is True
    assert config.layout.l0_shards == 16


def test_aws_example_loads() -> None:
    config = load_config(REPO / "config" / "aws.example.toml", env={})
    assert config.store.embedded is False
    assert config.layout.root == "epochgc/prod-cluster-1"


def test_environment_overrides_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[store]\nbucket = "from-file"\n[layout]\nl0_shards = 8\n')
    config = load_config(
        path,
        env={
            "EPOCHGC_STORE__BUCKET": "from-env",
            "EPOCHGC_STORE__EMBEDDED": "yes",
            "EPOCHGC_STORE__BASE_BACKOFF_SECONDS": "0.5",
            "UNRELATED": "x",
        },
    )
    assert config.store.bucket == "from-env"
    assert config.store.embedded is True
    assert config.store.base_backoff_seconds == 0.5
    assert config.layout.l0_shards == 8


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("[layout]\nl0_shards = 0\n", "layout.l0_shards", "must be in 1..1000"),
        ("[layout]\nl0_shards = 1001\n", "layout.l0_shards", "must be in 1..1000"),
        ('[layout]\nroot = ""\n', "layout.root", "not a valid root"),
        ('[layout]\nroot = "/"\n', "layout.root", "not a valid root"),
        ('[layout]\nroot = "a/"\n', "layout.root", "not a valid root"),
        ('[layout]\nl0_shards = "16"\n', "layout.l0_shards", "must be int"),
        ("[store]\nembedded = 1\n", "store.embedded", "must be bool"),
        ('[store]\nbucket = "No_Such"\n', "store.bucket", "not a valid S3 bucket"),
        ('[store]\nendpoint_url = "localhost:9000"\n', "store.endpoint_url", "http"),
        ("[store]\nbuckett = 1\n", "store.buckett", "unknown key"),
        ("[gcc]\nx = 1\n", "gcc", "unknown section"),
        ("[store]\nbase_backoff_seconds = 9.0\n", "store.base_backoff_seconds", "must not"),
        ('[logging]\nlevel = "LOUD"\n', "logging.level", "must be one of"),
        ("store = 3\n", "store", "must be a table"),
        ("[ownership]\nmax_moves_per_round = 0\n", "ownership.max_moves_per_round", "must be in"),
        (
            "[ownership]\nround_interval_seconds = 0.0\n",
            "ownership.round_interval_seconds",
            "must be in 0.1..3600",
        ),
    ],
)
def test_bad_values_name_file_key_and_reason(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert info.value.source == str(path)
    assert info.value.key == key
    assert reason in info.value.reason
    assert str(path) in str(info.value)


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, env={"EPOCHGC_LAYOUT__L0_SHARDS": "many"})
    assert info.value.source == "environment EPOCHGC_LAYOUT__L0_SHARDS"
    assert info.value.key == "layout.l0_shards"
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(None, env={"EPOCHGC_STORE__NOPE": "1"})


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[store\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path, env={})
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "missing.toml", env={})


def test_secrets_never_appear_in_repr_or_describe() -> None:
    config = load_config(
        None,
        env={
            "EPOCHGC_STORE__ACCESS_KEY_ID": "AKIAEXAMPLE",
            "EPOCHGC_STORE__SECRET_ACCESS_KEY": "s3cr3t",
        },
    )
    assert "s3cr3t" not in repr(config)
    assert "s3cr3t" not in str(config.describe())
    assert config.describe()["store"]["secret_access_key"] == "***"


@pytest.mark.parametrize("section", ["reconciler", "daemon"])
def test_removed_run_ticker_says_what_replaced_it(tmp_path: Path, section: str) -> None:
    path = tmp_path / "old.toml"
    path.write_text(f"[{section}]\nrun_ticker = false\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert info.value.key == f"{section}.run_ticker"
    assert "replaced by [epoch] ticker" in info.value.reason
    with pytest.raises(ConfigError, match=r"replaced by \[epoch\] ticker"):
        load_config(None, env={f"EPOCHGC_{section.upper()}__RUN_TICKER": "false"})
    assert load_config(None, env={"EPOCHGC_EPOCH__TICKER": "false"}).epoch.ticker is False


def test_controller_section_reaches_the_daemon(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[controller]\ncompact_interval_seconds = 60\ncompact_min_entries = 5\n")
    config = load_config(path, env={"EPOCHGC_CONTROLLER__EPOCH_HISTORY": "500"})
    policy = daemon_settings_of(config, node_id="gc-1").compaction
    assert (policy.interval_seconds, policy.min_entries, policy.epoch_history) == (60.0, 5, 500)
    path.write_text("[controller]\nepoch_history = 0\n")
    with pytest.raises(ConfigError, match=r"controller\.epoch_history"):
        load_config(path, env={})


def test_the_standalone_server_and_local_server_toml_agree_on_the_bucket() -> None:
    # `epochgc embedded-s3 --port 9000` (no --config) serves the built-in
    # default bucket; the quickstart's config must name that same bucket.
    server = load_config(REPO / "config" / "local-server.toml")
    assert server.store.bucket == load_config(None, env={}).store.bucket
    assert server.store.endpoint_url == "http://127.0.0.1:9000"
    assert server.gc.min_object_age_seconds <= 2.0 and server.gc.max_delete_fraction == 1.0


def test_a_section_made_in_code_is_checked_as_a_loaded_one() -> None:
    """A section built in code (a test, the demo, ``dataclasses.replace``)
    gets the checks a file gets, naming the field: an invalid value never
    reaches a component."""
    with pytest.raises(ValueError, match=r"^max_delete_fraction: must be in 0\.\.1, got 2.0"):
        dataclasses.replace(load_config(None, env={}).gc, max_delete_fraction=2.0)
    with pytest.raises(ValueError, match=r"^renew_interval_seconds: .* must be below ttl_seconds"):
        LeaseConfig(ttl_seconds=10.0, renew_interval_seconds=9.0, skew_margin_seconds=2.0)
