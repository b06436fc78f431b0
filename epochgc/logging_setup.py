"""Logging, set up once by the CLI.

Every module logs under its own name (``logging.getLogger(__name__)``), so
a line names the module that wrote it and an operator quiets or raises a
whole layer by its package (``epochgc.gc``, ``epochgc.leases``). The few
names operators are told to look for (``OPERATOR_LOGGERS``) stay fixed
whatever module writes them.

The HTTP libraries are held at INFO or above whatever level is asked for:
at DEBUG, botocore and urllib3 print request headers, which include signed
authorization, and credentials must never reach a log.
"""

from __future__ import annotations

import logging
import sys

SHOWN = {"shown": True}
"""``extra=`` of an INFO line a one-shot command shows even when quiet:
progress lines and announcements of long work (``progress.ProgressLog``)."""

OPERATOR_LOGGERS = {
    "epochgc.gc.clock": "epochgc.gc.future_times",
}
"""Logger names the documentation and the alert rules' runbooks tell
operators to look for, each with the one module that logs under it; every
other module logs under its own name. ``tests/unit/test_logger_names.py``
holds the code and the docs to this list."""

_NOISY_LIBRARIES = ("botocore", "boto3", "urllib3", "s3transfer", "werkzeug", "py4j", "apscheduler")
_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def _quiet(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or bool(getattr(record, "shown", False))


def setup_logging(level: int | str, *, quiet: bool = False) -> None:
    """Configure the root logger once; later calls only change the level.

    ``quiet`` (a one-shot command without ``-v``): at INFO, only warnings
    and the lines marked ``SHOWN`` reach stderr, not the lease and store
    bookkeeping a long-running process logs for its operator."""
    numeric = logging.getLevelName(level) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    root = logging.getLogger()
    handler = next((h for h in root.handlers if getattr(h, "_epochgc", False)), None)
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT))
        handler._epochgc = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    handler.removeFilter(_quiet)
    if quiet:
        handler.addFilter(_quiet)
    root.setLevel(numeric)
    for name in _NOISY_LIBRARIES:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
