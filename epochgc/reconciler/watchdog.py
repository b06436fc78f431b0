"""Which of a node's loops has stopped completing rounds (docs/operating.md,
"A node that stops making progress").

A reconciler node's lease is renewed by a heartbeat thread, independent of
what the node's loops do. Renewing proves only that the heartbeat runs;
what the peers need to know is that the node still does its work (leads,
reconciles, reports, takes and hands back partitions). So each loop reports
every round it completes, and this watchdog says when one has not completed
a round within its bound, or has died of an exception; the node then stops
renewing, lets go and exits (``ReconcilerNode.run``).

Pure: no clock of its own (every method takes the monotonic ``now``), no
I/O. Thread-safe: the event loop reports rounds while the lease heartbeat,
the leaders' lease checks and ``/healthz`` ask from their threads.

Invariants:

* A loop is judged only while watched (``watch`` .. ``unwatch``): a node
  stopping on request unwatches its loops first.
* The verdict is latched: once a loop is judged stopped, ``check`` keeps
  answering that verdict even if the loop completes a round later. By then
  the node has stopped renewing and owns nothing, and its partitions may be
  another node's already; a late round must not make it look alive again.

Example::

    dog = ProgressWatchdog(60.0)
    dog.watch("rounds", now=0.0, allowance_seconds=1.0)
    dog.completed("rounds", now=5.0)
    dog.check(now=30.0)          # None: 25 s since the last round
    dog.check(now=70.0)          # LoopStall("rounds", "no round completed for 65.00s ...")
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

ROUNDS_LOOP = "rounds"
"""The loop that leads, reconciles, housekeeps and reports."""
OWNERSHIP_LOOP = "ownership"
"""The loop that takes and hands back partitions."""
DEFAULT_BOUND_TTLS = 4.0
"""``max_round_seconds`` 0 means this many lease TTLs."""


def round_bound_seconds(max_round_seconds: float, ttl_seconds: float) -> float:
    """The watchdog's bound: ``[reconciler] max_round_seconds``, or when it
    is 0 (unset) ``DEFAULT_BOUND_TTLS`` lease TTLs."""
    return max_round_seconds or DEFAULT_BOUND_TTLS * ttl_seconds


@dataclass(frozen=True)
class LoopStall:
    """Why a loop is judged stopped.

    Attributes:
        loop: the loop's name (``rounds``, ``ownership``).
        cause: one line: the exception it died of, or how long it has gone
            without completing a round.
        error: the exception it died of (its stack goes to DEBUG), or
            ``None`` when it is overdue.
    """

    loop: str
    cause: str
    error: BaseException | None = None

    def describe(self) -> str:
        """``loop LOOP stopped: CAUSE`` (one line)."""
        return f"loop {self.loop} stopped: {self.cause}"


def describe_error(error: BaseException) -> str:
    """``Type: message`` on one line (``Type`` alone when the message is empty)."""
    text = " ".join(str(error).split())
    name = type(error).__name__
    return f"{name}: {text}" if text else name


@dataclass
class _Watched:
    last_completed: float
    allowance_seconds: float


class ProgressWatchdog:
    """Judges a set of named loops by the rounds they complete.

    Args:
        bound_seconds: a loop that has completed no round for this long
            (plus its own allowance, the pause it takes between rounds) is
            judged stopped. Must be positive.
        bound_name: the setting the bound comes from, named in the verdict
            so an operator knows what to change.
    """

    def __init__(self, bound_seconds: float, *, bound_name: str = "") -> None:
        if bound_seconds <= 0:
            raise ValueError(f"bound_seconds must be > 0, got {bound_seconds}")
        self.bound_seconds = bound_seconds
        self._bound_name = bound_name
        self._lock = threading.Lock()
        self._loops: dict[str, _Watched] = {}
        self._verdict: LoopStall | None = None

    def watch(self, loop: str, now: float, *, allowance_seconds: float = 0.0) -> None:
        """Start judging ``loop``: its first round must complete within the
        bound (plus ``allowance_seconds``) from ``now``."""
        with self._lock:
            self._loops[loop] = _Watched(now, max(0.0, allowance_seconds))

    def unwatch(self, loop: str) -> None:
        """Stop judging ``loop`` (it stops on request). A verdict stays."""
        with self._lock:
            self._loops.pop(loop, None)

    def completed(self, loop: str, now: float) -> None:
        """``loop`` completed a round at ``now`` (whatever its outcome: a
        round that failed on a store error and will be retried counts)."""
        with self._lock:
            watched = self._loops.get(loop)
            if watched is not None:
                watched.last_completed = max(watched.last_completed, now)

    def died(self, loop: str, error: BaseException | str, now: float) -> None:
        """``loop`` ended on an exception (or, given a string, for that
        reason) without being asked to stop; the first verdict stays."""
        del now  # a death is judged at once, whatever the clock says
        with self._lock:
            if self._verdict is not None:
                return
            if isinstance(error, BaseException):
                self._verdict = LoopStall(loop, describe_error(error), error)
            else:
                self._verdict = LoopStall(loop, error)

    def check(self, now: float) -> LoopStall | None:
        """The verdict: the first loop judged stopped, or ``None`` while
        every watched loop has completed a round within its bound."""
        with self._lock:
            if self._verdict is None:
                self._verdict = self._overdue(now)
            return self._verdict

    def _overdue(self, now: float) -> LoopStall | None:
        worst: tuple[float, str, float] | None = None
        for loop, watched in self._loops.items():
            late = now - watched.last_completed - self.bound_seconds - watched.allowance_seconds
            if late > 0 and (worst is None or late > worst[0]):
                worst = (late, loop, watched.allowance_seconds)
        if worst is None:
            return None
        late, loop, allowance = worst
        name = f"{self._bound_name} = " if self._bound_name else "bound "
        pause = f", plus {allowance:g}s between rounds" if allowance else ""
        elapsed = late + self.bound_seconds + allowance
        return LoopStall(
            loop, f"no round completed for {elapsed:.2f}s ({name}{self.bound_seconds:g}s{pause})"
        )
