"""Optional dependencies, imported only by the commands that need them.

The base install (boto3, APScheduler, prometheus-client, pyarrow) is what
the daemon and the CLI need; moto (the embedded S3) and pyspark (the Spark
job) are extras. ``require`` turns a missing one
into a one-line error naming the extra to install. A command calls it
before its first request to the store, even for a module it needs only
later (the plan a round writes at its end): the capability probes write,
and a command that fails after them has done work the README says it
does not do.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from epochgc.errors import MissingExtraError

BASE = ""
"""Not an extra: a module of the base install (a broken install lacks it)."""
EMBEDDED = "embedded"
SPARK = "spark"
SIMULATE = "simulate"
"""greenlet: ``epochgc simulate`` runs many processes' code in one thread."""


def require(module: str, extra: str, needed_by: str) -> ModuleType:
    """Import ``module`` or say which extra provides it.

    Raises:
        MissingExtraError: ``module`` is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if not extra:
            raise MissingExtraError(
                f"{needed_by} needs {err.name or module!r}, part of epochgc's base install: "
                "pip install --force-reinstall epochgc"
            ) from err
        raise MissingExtraError(
            f"{needed_by} needs the '{extra}' extra: pip install 'epochgc[{extra}]' "
            f"(missing module {err.name or module!r})"
        ) from err
