"""The folder of one ``epochgc verify`` run, made empty before it starts.

The checker reads every ``acks-*.jsonl`` and ``deletes-*.jsonl`` in the
folder, and the files ``faults-off`` and ``producers-off`` switch the
workers' faults and producing off (the quiesce). A run started in a
folder an earlier run left would count that run's acknowledgements
against a store that never held them, and would run quiesced from its
first second: a second ``make soak`` into one folder reported every seed
as losing data. So a folder an earlier run left (it holds that run's
``verify.toml``) is emptied, and any other folder holding files is
refused rather than emptied: it is not ours to delete.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from epochgc.errors import InvalidArgumentError

log = logging.getLogger(__name__)

RUN_MARKER = "verify.toml"
"""The settings file every run writes first into its folder."""


def check_run_folder(folder: Path) -> None:
    """Refuse a folder that holds files but no earlier verify run.

    Raises:
        InvalidArgumentError: it does.
    """
    if folder.is_dir() and any(folder.iterdir()) and not (folder / RUN_MARKER).is_file():
        raise InvalidArgumentError(
            f"verify --folder: {folder} holds files but no earlier verify run "
            f"(no {RUN_MARKER}): give an empty or new folder"
        )


def fresh_run_folder(folder: Path) -> None:
    """Make ``folder`` an empty folder for a run: created if missing,
    emptied if an earlier run left it.

    Raises:
        InvalidArgumentError: it holds files but no earlier run.
    """
    check_run_folder(folder)
    if (folder / RUN_MARKER).is_file():
        log.info("removing the earlier run in %s", folder)
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
