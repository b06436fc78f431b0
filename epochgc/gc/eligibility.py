"""Whether one listed object may be deleted. Pure.

The rule, and why each part is there:

* the key parses as ``{root}/l0/{shard:03d}/{epoch:018d}/{uuid}`` under the
  configured root: anything else (another system's objects, a sibling root
  sharing the prefix, a key a bug mangled) is never ours to delete;
* its epoch is ``<= M``: no live partition needs, or can ever accept again,
  an object that old (docs/architecture.md, "Why it is safe, in short");
* it is older than ``min_object_age``: a belt-and-braces margin for clocks
  and for writers that are slow between upload and registration.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import Enum

from epochgc.storage.keys import L0Key, parse_l0_key


class Verdict(Enum):
    """What the collector does with one listed object."""

    ELIGIBLE = "eligible"
    ABOVE_SAFE_EPOCH = "above_safe_epoch"
    TOO_YOUNG = "too_young"
    UNPARSEABLE = "unparseable"
    OUTSIDE_ROOT = "outside_root"


def judge(
    key: str,
    last_modified: datetime,
    *,
    root: str,
    safe_epoch: int,
    now: datetime,
    min_age: timedelta,
) -> tuple[Verdict, L0Key | None]:
    """The verdict for one object, and its parsed key when it is an L0 key."""
    if not key.startswith(f"{root}/l0/"):
        return Verdict.OUTSIDE_ROOT, None
    parsed = parse_l0_key(key, root)
    if parsed is None:
        return Verdict.UNPARSEABLE, None
    if parsed.epoch > safe_epoch:
        return Verdict.ABOVE_SAFE_EPOCH, parsed
    if last_modified > now - min_age:
        return Verdict.TOO_YOUNG, parsed
    return Verdict.ELIGIBLE, parsed
