"""The deletion rule of ``eligibility.judge``, vectorised over an Arrow
table of inventory rows (``key``, ``size``, ``last_modified``). Pure.

An inventory can hold hundreds of millions of rows; a Python call per row
would be the whole cost of the job. Every step here is an Arrow compute
kernel: a prefix test for the root, one RE2 match that both validates and
splits the rest of the key (shard, epoch, UUID exactly as
``keys.parse_l0_key`` accepts them), a cast of the epoch, two comparisons.
A test checks it against ``judge`` on random keys, so the two rules cannot
drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from epochgc.gc.eligibility import Verdict
from epochgc.gc.sweeper import NAMED_UNPARSEABLE

# The part of an L0 key after "{root}/l0/": what parse_l0_key accepts.
_L0_REST = (
    r"^(?P<shard>[0-9]{3})/(?P<epoch>[0-9]{18})/"
    r"(?P<id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$"
)


@dataclass(frozen=True)
class InventorySelection:
    """What a batch of inventory rows comes to."""

    eligible: pa.Table
    """``key`` and ``size`` of the rows that may be deleted."""
    listed: int
    skipped: dict[Verdict, int]
    bytes_eligible: int
    unparseable: tuple[str, ...] = ()
    """The first ``NAMED_UNPARSEABLE`` keys under the root that do not parse."""


def select_eligible(
    rows: pa.Table,
    *,
    root: str,
    safe_epoch: int,
    now: datetime,
    min_age: timedelta,
) -> InventorySelection:
    """Apply the deletion rule to every row at once.

    Rows are judged in ``judge``'s order: outside the root, then
    unparseable, then above ``M``, then too young. A row without a
    ``last_modified`` counts as too young (never deleted on a guess).
    """
    keys = rows.column("key")
    prefix = f"{root}/l0/"
    under_root = pc.fill_null(pc.starts_with(keys, prefix), False)
    rest = pc.utf8_slice_codeunits(keys, len(prefix))
    parsed = pc.extract_regex(rest, _L0_REST)
    parses = pc.and_(under_root, pc.fill_null(pc.is_valid(parsed), False))
    epochs = pc.cast(
        pc.if_else(parses, pc.struct_field(parsed, "epoch"), pa.scalar("0")), pa.int64()
    )
    above = pc.and_(parses, pc.greater(epochs, pa.scalar(safe_epoch, pa.int64())))
    cutoff = pa.scalar(now - min_age, pa.timestamp("ms", tz="UTC"))
    old_enough = pc.fill_null(pc.less_equal(rows.column("last_modified"), cutoff), False)
    in_range = pc.and_(parses, pc.invert(above))
    eligible_mask = pc.and_(in_range, old_enough)
    eligible = rows.select(["key", "size"]).filter(eligible_mask)
    counts = {
        Verdict.OUTSIDE_ROOT: _count(pc.invert(under_root)),
        Verdict.UNPARSEABLE: _count(pc.and_(under_root, pc.invert(parses))),
        Verdict.ABOVE_SAFE_EPOCH: _count(above),
        Verdict.TOO_YOUNG: _count(pc.and_(in_range, pc.invert(old_enough))),
    }
    size = pc.sum(pc.fill_null(eligible.column("size"), 0)).as_py() or 0
    unparseable: tuple[str, ...] = ()
    if counts[Verdict.UNPARSEABLE]:
        named = keys.filter(pc.and_(under_root, pc.invert(parses)))[:NAMED_UNPARSEABLE]
        unparseable = tuple(str(key) for key in named.to_pylist())
    return InventorySelection(eligible, rows.num_rows, counts, int(size), unparseable)


def _count(mask: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)
