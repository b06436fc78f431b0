"""Logging, set up once by the CLI.

Components log through ``logging.getLogger("epochgc.<component>")``. The
HTTP libraries are held at INFO or above whatever level is asked for: at
DEBUG, botocore and urllib3 print request headers, which include signed
authorization, and credentials must never reach a log.
"""

from __future__ import annotations

import logging
import sys

_NOISY_LIBRARIES = ("botocore", "boto3", "urllib3", "s3transfer", "werkzeug", "py4j", "apscheduler")
_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def setup_logging(level: int | str) -> None:
    """Configure the root logger once; later calls only change the level."""
    numeric = logging.getLevelName(level) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    root = logging.getLogger()
    if not any(getattr(h, "_epochgc", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT))
        handler._epochgc = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(numeric)
    for name in _NOISY_LIBRARIES:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
