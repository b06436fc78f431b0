"""What the collector knows about each L0 shard from earlier listings, and
its document ``{root}/gc/shards/state`` (docs/contract.md, "Shard
knowledge"). Pure: no I/O, no clock (the caller passes ``now``).

Per shard: when it was last listed and at which ``M``, the lowest epoch left
in it afterwards (keys of a shard sort by epoch, so that is the first key a
listing kept), the rate at which eligible bytes arrived, and the last time a
round saw ``M`` below what the shard can hold.

Why a listing's facts bound what a shard can hold until ``M`` moves: after a
listing at ``M_l``, the shard holds its kept keys (epochs ``>= lowest``) and
whatever was written since. A write a partition accepts carries an epoch
above that partition's ``M(p) >= M_l`` (docs/architecture.md), so new accepted data has
epochs ``>= M_l + 1``. Hence nothing in the shard is eligible while ``M <
floor = min(lowest, M_l + 1)``. Orphans written with an old epoch (a slow
writer, a foreign writer) break that assumption: the periodic full sweep
and inventory mode catch them.

Safety does not depend on any of this. Knowledge only decides which shards a
round *lists*; what is deleted is still judged key by key against ``M`` and
the age rule. A stale, absent or unreadable document means "list every
shard once", never "skip".

Every time in the document is the writing collector's wall clock, which
need not be the reader's. ``trust_knowledge`` applies the stored-time rule
(``epochgc.storage.stored_time``) before a round plans: a time ahead of the reader's
clock by more than the margin is unknown, so that shard is listed again, a
full sweep is due, a discovery is due; a time ahead by less is read as
"now". The knowledge a round writes back is built only from what it read
that way, so a collector never writes back a time from the future.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from epochgc.errors import MalformedRecordError
from epochgc.storage import documents
from epochgc.storage.stored_time import FutureTime, find_future, read_stored_time

KNOWLEDGE_VERSION = 1
_SHARD_NAME = re.compile(r"[0-9]{3}")
RATE_SMOOTHING = 0.5
"""Weight of the newest sample in the arrival-rate average."""


@dataclass(frozen=True)
class ShardObservation:
    """What one listing of one shard saw (filled by the sweeper).

    Attributes:
        eligible: objects found eligible (deleted, unless the round failed).
        eligible_bytes: their bytes.
        lowest_kept_epoch: the lowest epoch of a parseable key the listing
            kept (too young or above ``M``); ``None`` when it kept none up
            to where it stopped (it stops at the first key above ``M``,
            which it keeps, so ``None`` means the shard is now empty of
            parseable keys).
    """

    eligible: int = 0
    eligible_bytes: int = 0
    lowest_kept_epoch: int | None = None


@dataclass(frozen=True)
class ShardFacts:
    """What the last listing of one shard left us knowing."""

    listed_at: datetime
    safe_epoch: int
    """``M`` of that listing."""
    lowest_epoch: int | None
    """Lowest epoch left after it (``None``: no parseable key left)."""
    bytes_per_second: float = 0.0
    """Eligible bytes arriving per second (a smoothed average over listings)."""
    quiet_at: datetime | None = None
    """The last time a round saw ``M`` below ``floor_epoch``: nothing
    (accepted) in the shard was eligible then."""

    @property
    def floor_epoch(self) -> int:
        """The lowest epoch an accepted object in the shard can have (module
        docstring): nothing is eligible while ``M`` is below it."""
        fresh = self.safe_epoch + 1
        return fresh if self.lowest_epoch is None else min(self.lowest_epoch, fresh)

    @property
    def eligible_from(self) -> datetime:
        """The earliest time something in the shard may have become
        eligible, as far as rounds observed (conservative: never later than
        the truth for accepted writes)."""
        if self.quiet_at is not None and self.quiet_at > self.listed_at:
            return self.quiet_at
        return self.listed_at


@dataclass(frozen=True)
class ShardKnowledge:
    """Facts about every shard known, and when the last full sweep and the
    last shard discovery ran.

    Example::

        knowledge = ShardKnowledge()            # knows nothing: list everything
        decode_knowledge(encode_knowledge(knowledge)) == knowledge
    """

    shards: Mapping[int, ShardFacts] = field(default_factory=dict)
    full_sweep_at: datetime | None = None
    discovered_at: datetime | None = None
    written_by: str = ""
    """Who wrote the document last (a daemon's node id, ``gc collect@host``):
    names the writer when its times turn out to be from the future."""


def observe_listing(
    previous: ShardFacts | None,
    seen: ShardObservation,
    *,
    safe_epoch: int,
    now: datetime,
) -> ShardFacts:
    """The facts of a shard after a complete listing at ``now`` with ``M =
    safe_epoch``. The arrival rate is the eligible bytes found over the time
    since the previous listing, smoothed; a first listing cannot tell how
    long its bytes took to arrive and leaves the rate at 0 (the lag bound
    then sets the interval)."""
    rate = previous.bytes_per_second if previous is not None else 0.0
    if previous is not None:
        elapsed = (now - previous.eligible_from).total_seconds()
        if elapsed > 0:
            sample = seen.eligible_bytes / elapsed
            rate = sample if rate == 0 else RATE_SMOOTHING * sample + (1 - RATE_SMOOTHING) * rate
    return ShardFacts(
        listed_at=now,
        safe_epoch=safe_epoch,
        lowest_epoch=seen.lowest_kept_epoch,
        bytes_per_second=rate,
    )


def mark_quiet(facts: ShardFacts, now: datetime) -> ShardFacts:
    """A round at ``now`` saw ``M`` below the shard's floor."""
    return dataclasses.replace(facts, quiet_at=now)


def trust_knowledge(
    knowledge: ShardKnowledge, now: datetime, margin_seconds: float
) -> tuple[ShardKnowledge, tuple[FutureTime, ...]]:
    """The knowledge as a round at ``now`` may use it, and the times it
    found from the future (module docstring). Pure.

    A shard whose ``listed_at`` is from the future is forgotten (it is
    listed like a new shard); a ``quiet_at`` from the future is dropped;
    ``full_sweep_at`` or ``discovered_at`` from the future become ``None``
    (a full sweep, a discovery are due). Every time kept is at most ``now``.
    """
    found: list[FutureTime] = []

    def read(name: str, stored: datetime | None) -> datetime | None:
        future = find_future(
            "shard_knowledge", knowledge.written_by, name, stored, now, margin_seconds
        )
        if future is not None:
            found.append(future)
        return read_stored_time(stored, now, margin_seconds)

    shards: dict[int, ShardFacts] = {}
    for shard, facts in knowledge.shards.items():
        listed_at = read(f"shards.{shard:03d}.listed_at", facts.listed_at)
        quiet_at = read(f"shards.{shard:03d}.quiet_at", facts.quiet_at)
        if listed_at is not None:
            shards[shard] = dataclasses.replace(facts, listed_at=listed_at, quiet_at=quiet_at)
    trusted = ShardKnowledge(
        shards=shards,
        full_sweep_at=read("full_sweep_at", knowledge.full_sweep_at),
        discovered_at=read("discovered_at", knowledge.discovered_at),
        written_by=knowledge.written_by,
    )
    return trusted, tuple(found)


def encode_knowledge(knowledge: ShardKnowledge) -> bytes:
    """The document's bytes (docs/contract.md, "Shard knowledge")."""
    doc: dict[str, Any] = {
        "v": KNOWLEDGE_VERSION,
        "full_sweep_at": _time_or_none(knowledge.full_sweep_at),
        "discovered_at": _time_or_none(knowledge.discovered_at),
        "written_by": knowledge.written_by,
        "shards": {
            f"{shard:03d}": {
                "listed_at": documents.format_time(f.listed_at),
                "safe_epoch": f.safe_epoch,
                "lowest_epoch": f.lowest_epoch,
                "bytes_per_second": round(f.bytes_per_second, 3),
                "quiet_at": _time_or_none(f.quiet_at),
            }
            for shard, f in sorted(knowledge.shards.items())
        },
    }
    return documents.dump_document(doc)


def decode_knowledge(data: bytes, where: str = "shard knowledge") -> ShardKnowledge:
    """Parse the document.

    Raises:
        MalformedRecordError, UnsupportedVersionError: the caller lists
            every shard (it never skips on a document it cannot read).
    """
    doc = documents.load_document(data, where, KNOWLEDGE_VERSION)
    raw = doc.get("shards")
    if not isinstance(raw, dict):
        raise MalformedRecordError(f"{where}: 'shards' must be an object")
    shards: dict[int, ShardFacts] = {}
    for name, item in raw.items():
        if not _SHARD_NAME.fullmatch(name):
            raise MalformedRecordError(f"{where}: shard {name!r} is not three digits")
        if not isinstance(item, dict):
            raise MalformedRecordError(f"{where}: shard {name} must be an object")
        what = f"{where}, shard {name}"
        shards[int(name)] = ShardFacts(
            listed_at=_time(item.get("listed_at"), what),
            safe_epoch=_int(item.get("safe_epoch"), "safe_epoch", what),
            lowest_epoch=None
            if item.get("lowest_epoch") is None
            else _int(item.get("lowest_epoch"), "lowest_epoch", what),
            bytes_per_second=_rate(item.get("bytes_per_second", 0), what),
            quiet_at=None if item.get("quiet_at") is None else _time(item.get("quiet_at"), what),
        )
    written_by = documents.get_optional_str(doc, "written_by", where)
    return ShardKnowledge(
        shards=shards,
        full_sweep_at=None
        if doc.get("full_sweep_at") is None
        else _time(doc.get("full_sweep_at"), where),
        discovered_at=None
        if doc.get("discovered_at") is None
        else _time(doc.get("discovered_at"), where),
        written_by=written_by,
    )


def _time_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else documents.format_time(moment)


def _time(value: object, what: str) -> datetime:
    if not isinstance(value, str):
        raise MalformedRecordError(f"{what}: expected a time, got {value!r}")
    return documents.parse_time(value, what)


def _int(value: object, name: str, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MalformedRecordError(f"{what}: {name!r} must be an integer >= 0, got {value!r}")
    return value


def _rate(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise MalformedRecordError(f"{what}: 'bytes_per_second' must be a number >= 0")
    return float(value)
