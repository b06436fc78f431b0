"""The JSON Schemas of the public formats (``docs/schemas/``), loaded once,
for tests that hold the code's documents to the published contract.

Two details of the validator follow the contract rather than Python:

* ``integer`` means a JSON integer (``1``, never ``1.0``): the readers
  refuse a number with a fraction part, so the schemas do too (plain
  jsonschema counts ``1.0`` as an integer).
* ``pattern`` is ECMA-262, where ``$`` is the end of the string; Python's
  ``re.search`` also lets ``$`` match before a trailing newline, which would
  pass ``"orders\\n"`` as a topic name the readers refuse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"
NAMES = (
    "controller-entry",
    "controller-snapshot",
    "node-report",
    "run-summary",
    "control",
    "layout-marker",
    "status",
    "presence",
    "shard-knowledge",
)


def _is_integer(_checker: object, instance: object) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _ecma_pattern(
    validator: Any, pattern: str, instance: object, _schema: object
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    regex = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
    if re.search(regex, str(instance)) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


ContractValidator = validators.extend(
    Draft202012Validator,
    validators={"pattern": _ecma_pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """``docs/schemas/{name}.schema.json``, checked against the draft
    2020-12 meta-schema."""
    schema: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return schema


def schema_errors(name: str, document: Any) -> list[str]:
    """Why ``document`` does not fit schema ``name`` (empty: it fits)."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in ContractValidator(load_schema(name)).iter_errors(document)
    ]
