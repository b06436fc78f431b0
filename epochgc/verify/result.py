"""What an ``epochgc verify`` run did and found.

Every part of a run adds to one ``VerifyResult``: the disturbances count
the faults they injected, the churn its recreates, the checks what they
read back and every violation; ``run.summary`` prints it. It has a module
of its own so that those parts can fill it in without importing the run
that drives them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class VerifyResult:
    """What a run did and found."""

    seed: int
    records_acked: int = 0
    records_verified: int = 0
    records_discarded: int = 0
    """Acknowledged to an incarnation deleted since: not required back."""
    unreconciled_at_delete: int = 0
    """Records not yet in L1 when their incarnation was deleted."""
    duplicates: int = 0
    deletions: int = 0
    safe_epoch: int = 0
    cluster_epoch: int = 0
    store_faults: Counter[str] = field(default_factory=Counter)
    process_faults: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    paused: list[tuple[float, float]] = field(default_factory=list)
    """(start, end) wall-clock seconds of each operator pause, from the
    moment its write was acknowledged to the moment resume was sent."""

    @property
    def ok(self) -> bool:
        return not self.violations and self.records_acked > 0
