"""Spark settings given to ``epochgc gc spark``: ``--conf KEY=VALUE`` (as
many as needed) over the ``[spark] conf`` table of the configuration. Pure:
no pyspark, no I/O.

Checked before Spark starts, so a typo is one line naming the setting
instead of a JVM stack trace (or, worse, a setting Spark silently ignores):
a key is ``spark.`` followed by letters, digits, ``_``, ``-`` and ``.``;
a value is text on one line. Values are never logged (a user may pass a
``spark.executorEnv.*`` secret here, although docs/spark.md says not to).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from epochgc.errors import InvalidArgumentError

_KEY = re.compile(r"^spark\.[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def conf_key_problem(key: str) -> str | None:
    """Why ``key`` is not a Spark setting we accept, or ``None``."""
    if _KEY.match(key) is None or key.endswith(".") or ".." in key:
        return (
            f"not a Spark setting: {key!r} (spark. followed by letters, digits, '_', '-' and '.')"
        )
    return None


def conf_value_problem(value: object) -> str | None:
    """Why ``value`` is not a Spark setting value we accept, or ``None``."""
    if isinstance(value, bool | int | float | str):
        if isinstance(value, str) and ("\n" in value or "\r" in value):
            return "a value must be on one line"
        return None
    return f"must be text, a number or a boolean, got {type(value).__name__}"


def conf_text(value: bool | int | float | str) -> str:
    """A TOML value as Spark wants it (``true``, not ``True``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_conf_args(pairs: Iterable[str]) -> dict[str, str]:
    """``--conf KEY=VALUE`` arguments as a mapping (a later one wins).

    Raises:
        InvalidArgumentError: no ``=``, or a key or value we refuse.
    """
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep:
            raise InvalidArgumentError(f"--conf expects KEY=VALUE, got {key!r} (no '=')")
        problem = conf_key_problem(key) or conf_value_problem(value)
        if problem is not None:
            raise InvalidArgumentError(f"--conf {key}: {problem}")
        out[key] = value
    return out


def merged_conf(configured: Mapping[str, str], command_line: Mapping[str, str]) -> dict[str, str]:
    """The ``[spark] conf`` table overridden by the command line's ``--conf``."""
    return {**configured, **command_line}
