"""Configuration mistakes an operator makes by hand say exactly where they
are and what was meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.config import load_config
from epochgc.errors import ConfigError


def test_a_toml_syntax_error_names_its_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "syntax.toml"
    path.write_text('[store]\nbucket = "b"\nregion "eu-west-1"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: line 3, column 8: invalid TOML: "), text
    assert "(at line" not in text, "the position is said once, up front"


def test_an_override_with_one_underscore_is_an_error_naming_the_right_spelling() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, env={"EPOCHGC_STORE_BUCKET": "mine"})
    text = str(caught.value)
    assert "EPOCHGC_STORE_BUCKET" in text and "EPOCHGC_STORE__BUCKET" in text


def test_other_epochgc_variables_are_left_alone() -> None:
    # Not a section_key spelling of any setting: not ours to judge.
    config = load_config(None, env={"EPOCHGC_PROFILE_OUTPUT": "/tmp/profile"})
    assert config.store.bucket


@pytest.mark.parametrize("value", ["1e-300", "0.0001", "-1"])
def test_a_rate_limit_too_small_to_share_out_is_refused(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, env={"EPOCHGC_GC__RATE_LIMIT_KEYS_PER_SECOND": value})
    assert "gc.rate_limit_keys_per_second" in str(caught.value)
    assert "must be 0 (none) or in 0.001..1000000" in str(caught.value)


@pytest.mark.parametrize("value", ["0", "0.001", "20"])
def test_a_rate_limit_of_zero_or_a_usable_cap_is_taken(value: str) -> None:
    config = load_config(None, env={"EPOCHGC_GC__RATE_LIMIT_KEYS_PER_SECOND": value})
    assert config.gc.rate_limit_keys_per_second == float(value)
