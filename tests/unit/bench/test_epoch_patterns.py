"""The peer tools' include patterns select a key iff its epoch <= M.

``aws s3 rm`` matches with ``fnmatch.fnmatch`` against the key, ``s3cmd``
with ``re.search(fnmatch.translate(glob), key)``: both are reproduced here
exactly. rclone has its own glob syntax, so its patterns are checked with
the real rclone (``rclone lsf`` on a local folder laid out like a shard
tree) when it is installed.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.epoch_patterns import epoch_globs, fnmatch_includes, rclone_includes
from epochgc.storage.keys import EPOCH_MAX, encode_l0_key

ROOT = "epochgc"
OBJECT_ID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"

safe_epochs = st.one_of(
    st.integers(0, 200),
    st.integers(0, EPOCH_MAX),
    st.builds(lambda d: 10**d - 1, st.integers(1, 18)),
    st.builds(lambda d: 10**d, st.integers(0, 17)),
)


def epochs_near(safe_epoch: int) -> st.SearchStrategy[int]:
    """Mostly just above or below M, where a wrong digit class shows."""
    near = st.integers(-150, 150).map(lambda d: min(max(safe_epoch + d, 0), EPOCH_MAX))
    return st.one_of(near, near, near, st.integers(0, EPOCH_MAX), st.integers(0, 1000))


@st.composite
def cases(draw: st.DrawFn) -> tuple[int, int, int]:
    safe_epoch = draw(safe_epochs)
    return safe_epoch, draw(epochs_near(safe_epoch)), draw(st.integers(0, 999))


@settings(max_examples=400)
@given(cases())
def test_aws_patterns_match_a_key_iff_its_epoch_is_at_most_m(case: tuple[int, int, int]) -> None:
    safe_epoch, epoch, shard = case
    key = encode_l0_key(ROOT, shard, epoch, OBJECT_ID)
    # awscli joins the pattern to the S3 prefix it was given and fnmatches
    # the bucket/key path against it.
    path = f"bucket/{key}"
    patterns = [f"bucket/{ROOT}/l0/{p}" for p in fnmatch_includes(safe_epoch)]
    assert any(fnmatch.fnmatch(path, p) for p in patterns) == (epoch <= safe_epoch)


@settings(max_examples=400)
@given(cases())
def test_s3cmd_patterns_match_a_key_iff_its_epoch_is_at_most_m(
    case: tuple[int, int, int],
) -> None:
    safe_epoch, epoch, shard = case
    # s3cmd matches the key relative to the URI given (here {root}/l0/).
    relative = encode_l0_key(ROOT, shard, epoch, OBJECT_ID).removeprefix(f"{ROOT}/l0/")
    regexes = [re.compile(fnmatch.translate(p)) for p in fnmatch_includes(safe_epoch)]
    assert any(r.search(relative) for r in regexes) == (epoch <= safe_epoch)


@given(st.integers(0, EPOCH_MAX))
def test_there_is_one_glob_per_nonzero_digit_plus_m_itself(safe_epoch: int) -> None:
    globs = epoch_globs(safe_epoch)
    assert len(globs) == sum(1 for d in f"{safe_epoch:018d}" if d != "0") + 1
    assert all(len(re.sub(r"\[[0-9]-[0-9]\]", "d", g)) == 18 for g in globs)


def test_nothing_matches_below_epoch_zero_and_huge_epochs_are_refused() -> None:
    assert epoch_globs(-1) == []
    with pytest.raises(ValueError, match="more than 18 digits"):
        epoch_globs(EPOCH_MAX + 1)


@pytest.mark.skipif(shutil.which("rclone") is None, reason="rclone not installed")
@settings(max_examples=15)
@given(safe_epoch=safe_epochs, shards=st.lists(st.integers(0, 999), min_size=1, max_size=3))
def test_rclone_selects_exactly_the_eligible_files(
    safe_epoch: int, shards: list[int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    tree = tmp_path_factory.mktemp("l0")
    epochs = {0, safe_epoch, safe_epoch + 1, max(safe_epoch - 1, 0), 10**17, EPOCH_MAX}
    expected = set()
    for shard in shards:
        for epoch in epochs:
            if epoch > EPOCH_MAX:
                continue
            relative = f"{shard:03d}/{epoch:018d}/{uuid.uuid4()}"
            (tree / relative).parent.mkdir(parents=True, exist_ok=True)
            (tree / relative).write_bytes(b"x")
            if epoch <= safe_epoch:
                expected.add(relative)
    command = ["rclone", "lsf", "-R", "--files-only", "--config", str(Path("/dev/null"))]
    for pattern in rclone_includes(safe_epoch):
        command += ["--include", pattern]
    listed = subprocess.run(
        [*command, str(tree)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert set(listed) == expected
