"""The commands of a partition log (docs/architecture.md, "Life of an
L0 object"). Pure value types.

Every command carries the leader ``term`` it was written under; replay
ignores entries of a term older than the newest ``term_start``. Every
command but ``term_start`` also carries ``seq``, its position in the
leader's stream for that term (``term_start`` is 0, then 1, 2, ...). Replay
applies only the next expected ``seq``: when another writer steals a slot in
the middle of a pipeline, the leader's entries that landed behind the stolen
slot are out of sequence and ignored, and the leader replays the whole
unacknowledged tail in order, so nothing is applied twice or out of order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class PlaceholderBatch:
    """A byte range of an L0 object holding ``records`` records of this
    partition."""

    l0_key: str
    byte_offset: int
    byte_length: int
    records: int

    def __post_init__(self) -> None:
        if self.byte_offset < 0 or self.byte_length < 0 or self.records < 1:
            raise ValueError(
                f"invalid placeholder batch offset={self.byte_offset} "
                f"length={self.byte_length} records={self.records}"
            )


@dataclass(frozen=True)
class TermStart:
    """A new leader's first entry. ``nonce`` tells the writer's own entry
    from a rival's for the same term (empty in entries written before it)."""

    term: int
    nonce: str = ""


@dataclass(frozen=True)
class Placeholders:
    """Records of this partition written at ``epoch`` into L0 objects."""

    term: int
    seq: int
    epoch: int
    batches: tuple[PlaceholderBatch, ...]

    @property
    def record_count(self) -> int:
        return sum(b.records for b in self.batches)


@dataclass(frozen=True)
class AdvanceEpoch:
    """Housekeeping for an idle partition: slide the window to ``epoch``."""

    term: int
    seq: int
    epoch: int


@dataclass(frozen=True)
class AdvanceReconciled:
    """Every record up to ``lro`` and every placeholder up to log offset
    ``log_offset`` is in L1."""

    term: int
    seq: int
    lro: int
    log_offset: int


@dataclass(frozen=True)
class SetAllowedLocalStartOffset:
    """The reconciler's retention hint (``None``: no local target)."""

    term: int
    seq: int
    offset: int | None


@dataclass(frozen=True)
class SetStartOffset:
    """Retention: records below ``offset`` are gone."""

    term: int
    seq: int
    offset: int


@dataclass(frozen=True)
class RecordsLost:
    """An operator's explicit, logged record that records ``first..last``
    are gone for good (their L0 object went missing or corrupt before it
    was reconciled: ``epochgc partition skip``).

    Replay treats the range like reconciled records: ``lro`` moves to
    ``last`` and ``reconciled_log_offset`` to ``log_offset``, the log offset
    just below the next placeholder that still holds records, so ``M(p)``
    moves on. It carries no ``seq``: the operator's tool is not the leader;
    it appends right after the entry it validated against, under the term it
    saw, so a leader in flight loses that slot and must start a new term
    (whose replay sees the loss). ``reason``, ``by`` and ``ts`` are what
    readers of the lost offsets are told. ``nonce`` keeps two operators'
    identical skips apart, so the one whose entry landed second is told
    that it did nothing.
    """

    term: int
    first: int
    last: int
    log_offset: int
    reason: str
    by: str
    ts: datetime
    nonce: str = ""


SequencedCommand = (
    Placeholders | AdvanceEpoch | AdvanceReconciled | SetAllowedLocalStartOffset | SetStartOffset
)

Command = (
    TermStart
    | Placeholders
    | AdvanceEpoch
    | AdvanceReconciled
    | SetAllowedLocalStartOffset
    | SetStartOffset
    | RecordsLost
)
