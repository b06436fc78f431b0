"""Spark settings from ``--conf`` and ``[spark] conf``: checked before Spark
starts, one line naming the setting when refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.config import load_config
from epochgc.errors import ConfigError, InvalidArgumentError
from epochgc.gc.spark.conf import merged_conf, parse_conf_args
from tests.support.cli import run_cli

KEYS = st.from_regex(r"spark\.[a-z][a-zA-Z0-9_]{0,8}(\.[a-zA-Z0-9_-]{1,8}){0,3}", fullmatch=True)
VALUES = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]))


@given(KEYS, VALUES)
def test_a_key_and_any_one_line_value_come_back_as_given(key: str, value: str) -> None:
    assert parse_conf_args([f"{key}={value}"]) == {key: value}


def test_the_command_line_wins_over_the_configuration_and_later_flags_over_earlier() -> None:
    flags = parse_conf_args(["spark.executor.memory=1g", "spark.executor.memory=3g"])
    assert merged_conf({"spark.executor.memory": "2g", "spark.a": "x"}, flags) == {
        "spark.executor.memory": "3g",
        "spark.a": "x",
    }


@pytest.mark.parametrize(
    ("pair", "says"),
    [
        ("spark.executor.memory", "expects KEY=VALUE"),
        ("executor.memory=2g", "not a Spark setting: 'executor.memory'"),
        ("spark..memory=2g", "not a Spark setting"),
        ("spark.a b=1", "not a Spark setting"),
        ("spark.a=x\ny", "one line"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it(pair: str, says: str) -> None:
    with pytest.raises(InvalidArgumentError, match=says) as refused:
        parse_conf_args([pair])
    assert "\n" not in str(refused.value)


def test_the_config_table_takes_text_numbers_and_booleans(tmp_path: Path) -> None:
    path = tmp_path / "gc.toml"
    path.write_text(
        '[spark]\nconf = { "spark.executor.memory" = "2g", "spark.executor.cores" = 2, '
        '"spark.authenticate" = true }\n'
    )
    assert load_config(path, env={}).spark.conf == {
        "spark.executor.memory": "2g",
        "spark.executor.cores": "2",
        "spark.authenticate": "true",
    }


def test_a_bad_config_key_or_value_names_file_and_setting(tmp_path: Path) -> None:
    path = tmp_path / "gc.toml"
    path.write_text('[spark]\nconf = { "executor.memory" = "2g" }\n')
    with pytest.raises(ConfigError, match=r"spark\.conf\.executor\.memory: not a Spark setting"):
        load_config(path, env={})
    path.write_text('[spark]\nconf = { "spark.x" = [1] }\n')
    with pytest.raises(ConfigError, match=r"spark\.conf\.spark\.x: must be text"):
        load_config(path, env={})


def test_the_environment_takes_an_inline_table() -> None:
    env = {"EPOCHGC_SPARK__CONF": '{"spark.executor.memory" = "4g"}'}
    assert load_config(None, env=env).spark.conf == {"spark.executor.memory": "4g"}
    with pytest.raises(ConfigError, match="EPOCHGC_SPARK__CONF"):
        load_config(None, env={"EPOCHGC_SPARK__CONF": "spark.executor.memory=4g"})


def test_credentials_mode_is_driver_or_executor(tmp_path: Path) -> None:
    path = tmp_path / "gc.toml"
    path.write_text('[spark]\ncredentials = "instance"\n')
    with pytest.raises(ConfigError, match="must be one of driver, executor"):
        load_config(path, env={})


def test_describe_masks_a_secret_named_in_the_conf_table(tmp_path: Path) -> None:
    path = tmp_path / "gc.toml"
    path.write_text(
        '[spark]\nconf = { "spark.executorEnv.AWS_SECRET_ACCESS_KEY" = "s3cr3t", '
        '"spark.executor.memory" = "2g" }\n'
    )
    assert load_config(path, env={}).describe()["spark"]["conf"] == {
        "spark.executorEnv.AWS_SECRET_ACCESS_KEY": "***",
        "spark.executor.memory": "2g",
    }


def test_gc_spark_refuses_a_bad_conf_flag_in_one_line_before_spark_starts() -> None:
    done = run_cli("gc", "spark", "--master", "spark://127.0.0.1:1", "--conf", "executor.memory")
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith("--conf expects KEY=VALUE, got 'executor.memory' (no '=')"), line
