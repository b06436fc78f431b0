"""Every number in the configuration has a range, checked at load.

A value the code cannot use (``[lease] ttl_seconds = 1e12`` overflowed a
date on every renewal while the daemon ran no round) must stop the process
before it starts, naming the key and the range; and every range is
written next to its key in ``config/default.toml``, where an operator
looks them up.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochgc.config import Config, NumericRange, load_config
from epochgc.errors import ConfigError
from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]

LARGEST_DURATION_SECONDS = 366 * 86400
"""No duration the product waits, retries or keeps for is longer than a
year (retention in days, at most ten years)."""


def numeric_settings() -> list[tuple[str, str, str]]:
    """(section, key, type) of every int and float setting."""
    out = []
    for section in dataclasses.fields(Config):
        for f in dataclasses.fields(section.default_factory()):  # type: ignore[misc]
            if f.type in ("int", "float"):
                out.append((section.name, f.name, str(f.type)))
    return out


SETTINGS = numeric_settings()


def range_of(section: str, key: str) -> NumericRange:
    cls = type(getattr(Config(), section))
    check = {f.name: f.metadata.get("check") for f in dataclasses.fields(cls)}[key]
    assert isinstance(check, NumericRange), f"{section}.{key} has no range"
    return check


@pytest.mark.parametrize(("section", "key", "kind"), SETTINGS)
def test_every_number_has_a_finite_range_fit_for_its_unit(
    section: str, key: str, kind: str
) -> None:
    bounds = range_of(section, key)
    assert math.isfinite(bounds.lo) and math.isfinite(bounds.hi) and bounds.lo < bounds.hi
    if key.endswith("_seconds"):
        assert bounds.hi <= LARGEST_DURATION_SECONDS, f"{section}.{key}: {bounds.hi} s"
    if key.endswith("_days"):
        assert bounds.hi <= 3660, f"{section}.{key}: {bounds.hi} days"
    default = getattr(getattr(Config(), section), key)
    assert bounds(default) is None, f"the default {default} is outside {bounds.text()}"


DEFAULT_LINE = re.compile(r"^(\w+) = ([^#]+?)\s+# range (.+)$")


def test_default_toml_writes_each_range_beside_its_key() -> None:
    ranges: dict[str, str] = {}
    section = ""
    for line in (REPO / "config" / "default.toml").read_text().splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        found = DEFAULT_LINE.match(line)
        if found:
            ranges[f"{section}.{found.group(1)}"] = found.group(3)
    expected = {f"{s}.{k}": range_of(s, k).text() for s, k, _ in SETTINGS}
    assert ranges == expected


def absurd_values(bounds: NumericRange) -> st.SearchStrategy[float]:
    """Huge, tiny, negative, not a number, infinite: whatever the range
    leaves out."""
    huge = st.floats(min_value=1e13, max_value=1e308)
    negative = st.floats(max_value=-1e-300, min_value=-1e308)
    specials = st.sampled_from([math.nan, math.inf, -math.inf])
    outside = st.one_of(
        st.floats(min_value=bounds.hi, exclude_min=True, allow_infinity=False),
        st.floats(max_value=bounds.lo, exclude_max=True, allow_infinity=False),
    ).filter(lambda v: bounds(v) is not None)
    return st.one_of(huge, negative, specials, outside)


def toml_number(value: float, kind: str) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if kind == "int" and value.is_integer() and abs(value) < 1e18:
        return str(int(value))
    return repr(value)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), setting=st.sampled_from(SETTINGS))
def test_an_absurd_number_is_refused_at_load_naming_key_and_range(
    data: st.DataObject, setting: tuple[str, str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    section, key, kind = setting
    bounds = range_of(section, key)
    value = data.draw(absurd_values(bounds))
    text = toml_number(value, kind)
    path = tmp_path_factory.mktemp("cfg") / "absurd.toml"
    path.write_text(f"[{section}]\n{key} = {text}\n")
    for source in ("file", "environment"):
        with pytest.raises(ConfigError) as info:
            if source == "file":
                load_config(path, env={})
            else:
                load_config(None, env={f"EPOCHGC_{section.upper()}__{key.upper()}": text})
        assert info.value.key == f"{section}.{key}"
        if not (kind == "int" and ("." in text or "e" in text or "n" in text)):
            assert bounds.span() in info.value.reason, info.value.reason


def test_a_lease_ttl_of_1e12_exits_2_in_one_line_naming_key_and_range(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text("[store]\nembedded = true\n[lease]\nttl_seconds = 1e12\n")
    done = run_cli("daemon", "--config", str(path), "--duration", "5")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "lease.ttl_seconds" in lines[0] and range_of("lease", "ttl_seconds").span() in lines[0]
