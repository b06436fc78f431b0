"""Benchmark helper: include patterns that select exactly the L0 keys whose
epoch is at most ``M``, for the peer tools' filters. Pure, no I/O.

L0 keys are ``{root}/l0/{shard:03d}/{epoch:018d}/{uuid}`` (``storage/keys.py``):
the epoch is a fixed-width decimal, so "epoch <= M" is a lexicographic
bound on one 18-character segment, which a handful of globs built from
literal digits and ``[a-b]`` digit classes express exactly. For
``M = 80`` (``000000000000000080``)::

    0000000000000000[0-7][0-9]    epochs 0..79
    000000000000000080            epoch 80

One glob per non-zero digit of ``M`` plus ``M`` itself: at most 19. Only
digits and classes are used (no ``?``), so a glob can only match an
18-digit segment, and in an L0 key only the epoch segment is one (the
shard has 3 digits, the object id is a UUID with dashes).

Each tool anchors its patterns differently:

* ``aws s3 rm`` and ``s3cmd del`` match with Python ``fnmatch`` (where
  ``*`` also matches ``/``): ``*/{glob}/*``;
* ``rclone`` matches its own glob syntax against the path below the remote
  root (``*`` stops at ``/``; a leading ``/`` anchors at the root), with the
  root at ``{root}/l0``: ``/*/{glob}/*``.
"""

from __future__ import annotations

EPOCH_DIGITS = 18


def epoch_globs(safe_epoch: int, digits: int = EPOCH_DIGITS) -> list[str]:
    """Globs over a ``digits``-wide zero-padded epoch that match exactly the
    epochs ``0..safe_epoch`` (none when ``safe_epoch < 0``).

    Raises:
        ValueError: ``safe_epoch`` does not fit in ``digits`` digits.
    """
    if safe_epoch < 0:
        return []
    if safe_epoch >= 10**digits:
        raise ValueError(f"safe_epoch={safe_epoch} has more than {digits} digits")
    text = f"{safe_epoch:0{digits}d}"
    globs = []
    for i, digit in enumerate(text):
        if digit == "0":
            continue
        below = "0" if digit == "1" else f"[0-{int(digit) - 1}]"
        globs.append(text[:i] + below + "[0-9]" * (digits - i - 1))
    globs.append(text)
    return globs


def fnmatch_includes(safe_epoch: int) -> list[str]:
    """``--include`` values for ``aws s3 rm`` and ``s3cmd del`` (Python
    ``fnmatch`` semantics), to follow ``--exclude '*'``."""
    return [f"*/{glob}/*" for glob in epoch_globs(safe_epoch)]


def rclone_includes(safe_epoch: int) -> list[str]:
    """``--include`` values for rclone with the remote path at ``{root}/l0``."""
    return [f"/*/{glob}/*" for glob in epoch_globs(safe_epoch)]
