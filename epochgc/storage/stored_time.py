"""How a process reads a wall-clock time another process wrote to the
bucket. Pure: no I/O, no clock (the caller passes its ``now``).

The rule, in one place for every reader: **a stored time ahead of my clock
by more than the skew margin is unknown; read it in the direction that
keeps collection going.** What "unknown" means is each reader's choice,
always the one that keeps work happening: a shard whose last listing is
unknown is due, a full sweep whose last run is unknown is due, a document
whose age is unknown counts as stale. A time ahead by no more than the
margin is taken as "just now" (``now``), never as later than ``now``.

Why: the writer's clock is not ours. A host whose clock runs 30 days ahead
writes times 30 days in the future; a reader that believed them would
think everything was done moments ago and wait 30 days before doing it
again. No decision may rest on another host's clock being right, so a
time from the future says nothing, and reading it as nothing errs toward
more listing and more checking, which costs requests, never a deletion.

A time in the past (a writer whose clock runs behind) is taken as it is:
it makes work due *sooner*, which is the safe direction for everything
that reads it here. Deletion never rests on any of these times; it rests
on ``M`` and on the object's own store timestamp (``gc.eligibility``).

Example::

    read_stored_time(stored_at, now, 60.0)   # None: more than a minute ahead
    stored_age_seconds(stored_at, now, 60.0) # None: unknown, count as stale
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

DEFAULT_MARGIN_SECONDS = 60.0
"""The default of ``gc.clock_skew_margin_seconds``: two hosts' clocks
kept by NTP agree far better; one a minute off is broken."""


def skew_seconds(stored: datetime, now: datetime) -> float:
    """How far ``stored`` is ahead of ``now`` (negative: behind)."""
    return (stored - now).total_seconds()


def is_from_future(stored: datetime, now: datetime, margin_seconds: float) -> bool:
    """``stored`` is ahead of ``now`` by more than the margin: unknown."""
    return skew_seconds(stored, now) > margin_seconds


def read_stored_time(
    stored: datetime | None, now: datetime, margin_seconds: float
) -> datetime | None:
    """The stored time as this reader may use it: ``None`` (unknown) when it
    is absent or from the future; otherwise never later than ``now``.

    Args:
        stored: the time another process wrote.
        now: this reader's clock.
        margin_seconds: how far ahead a writer's clock may run before its
            times count as unknown (``gc.clock_skew_margin_seconds``).
    """
    if stored is None or is_from_future(stored, now, margin_seconds):
        return None
    return min(stored, now)


def stored_age_seconds(stored: datetime, now: datetime, margin_seconds: float) -> float | None:
    """Seconds since ``stored`` by this reader's clock, at least 0; ``None``
    when unknown (from the future): the caller counts the document as
    stale."""
    read = read_stored_time(stored, now, margin_seconds)
    return None if read is None else (now - read).total_seconds()


@dataclass(frozen=True)
class FutureTime:
    """A stored time a reader found ahead of its clock by more than the
    margin, for the log and the metric.

    Attributes:
        document: which kind of document (a bounded metric label:
            ``shard_knowledge``, ``report``, ``presence``, ``run``).
        writer: who wrote it, as far as the document says (``""``: unknown).
        field: the field that held it.
        skew_seconds: how far ahead of the reader's clock it was.
    """

    document: str
    writer: str
    field: str
    skew_seconds: float


def find_future(
    document: str,
    writer: str,
    field: str,
    stored: datetime | None,
    now: datetime,
    margin_seconds: float,
) -> FutureTime | None:
    """A ``FutureTime`` when ``stored`` is from the future, else ``None``."""
    if stored is None or not is_from_future(stored, now, margin_seconds):
        return None
    return FutureTime(document, writer, field, skew_seconds(stored, now))
