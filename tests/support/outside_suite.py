"""The suites ``make test`` collects but cannot run (a Ceph gateway, the
container images): their tests are skipped, saying how to run them,
unless the target that prepares them exported what they need."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest


def skip_unless_exported(
    items: list[pytest.Item], folder: str, keys: Sequence[str], reason: str
) -> None:
    """Mark every test under ``folder`` (``tests/rgw/``) skipped with
    ``reason`` unless each of the environment variables ``keys`` is set."""
    if all(os.environ.get(k) for k in keys):
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if folder in item.nodeid:
            item.add_marker(skip)
