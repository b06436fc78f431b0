"""The JSON Schemas of the public formats (``docs/schemas/``), loaded once,
for tests that hold the code's documents to the published contract."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


@cache
def validator(name: str) -> Draft202012Validator:
    """The validator of ``docs/schemas/{name}.schema.json`` (checked itself
    against the draft 2020-12 meta-schema)."""
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_errors(name: str, document: Any) -> list[str]:
    """Why ``document`` does not fit schema ``name`` (empty: it fits)."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator(name).iter_errors(document)
    ]
