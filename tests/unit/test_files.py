"""A local file written so that no reader sees half of it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from epochgc.files import write_atomically


def test_the_text_replaces_the_file_whole_with_the_mode_asked(tmp_path: Path) -> None:
    target = tmp_path / "switch"
    target.write_text("old")
    write_atomically(target, "new text", mode=0o640)
    assert target.read_text() == "new text"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["switch"]  # no temporary left


def test_a_failed_write_leaves_the_target_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "switch"
    target.mkdir()  # a folder in the way: the rename fails
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        write_atomically(target, "new")
    assert (target / "inside").read_text() == "kept"
    assert sorted(os.listdir(tmp_path)) == ["switch"]
