"""The folder a verify run starts in: emptied when an earlier run left it,
refused when it holds anything else, created when missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochgc.errors import InvalidArgumentError
from epochgc.verify.run_folder import RUN_MARKER, check_run_folder, fresh_run_folder


def test_a_missing_folder_is_created(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "seed-1"
    fresh_run_folder(folder)
    assert folder.is_dir() and not any(folder.iterdir())


def test_an_earlier_runs_files_are_removed(tmp_path: Path) -> None:
    folder = tmp_path / "seed-1"
    folder.mkdir()
    for name in (RUN_MARKER, "faults-off", "producers-off", "acks-node-1.jsonl", "node-1.log"):
        (folder / name).write_text("earlier\n")
    fresh_run_folder(folder)
    assert folder.is_dir() and not any(folder.iterdir())


def test_an_empty_folder_is_kept(tmp_path: Path) -> None:
    fresh_run_folder(tmp_path)
    assert tmp_path.is_dir()


def test_a_folder_of_other_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(InvalidArgumentError, match="holds files but no earlier verify run"):
        check_run_folder(tmp_path)
    with pytest.raises(InvalidArgumentError):
        fresh_run_folder(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
