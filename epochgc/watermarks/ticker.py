"""The epoch ticker: one per cluster, whatever the number of processes
(docs/operating.md, "The processes", "Where the ticker runs").

The cluster epoch moves when an ``epoch_tick`` is appended to the controller
log. Exactly one process does that: the holder of the singleton lease
``ticker`` (``{root}/meta/leases/ticker``). Every GC daemon and reconciler
node with ``[epoch] ticker = true`` competes for it; the holder ticks once
per ``[epoch] interval_seconds`` and the others stand by. N eligible
processes give one epoch per interval, not N.

Why only one: concurrent ticks are harmless to safety (every partition's
epoch window rejects what is older than its lower bound), but each extra
tick is one more controller-log object, and writers rely on consecutive
ticks being at least one interval apart: with ``epoch.cache_ttl_seconds``
below the interval, a cached epoch then lags by at most one.

Scheduling is ``TickSchedule.decide`` (pure: the monotonic ``now`` is a
parameter):

* Not held: no tick; try the lease again after ``poll_seconds``.
* Held: tick once a whole interval has passed since the later of (a) the
  moment this holding began and (b) the end of this holder's last tick.
* So a new holder waits one interval before its first tick. It could
  instead schedule from the ``ts`` of the newest controller entry, but that
  is another machine's wall clock, which the lease design never trusts
  (``epochgc verify`` skews clocks by minutes). Waiting is safe without it:
  the predecessor stopped ticking before the lease changed hands (``stop()``
  releases only after its last tick; a lost grant expires, by the holder's
  own clock, before anyone may take it over), so ticks stay at least one
  interval apart across a hand-over. The price is one slower epoch per
  hand-over (a gap of up to two intervals plus a poll), which delays ``M``
  by that much and nothing else.
* A failed tick counts as a tick: its append may have landed with only the
  answer lost, and retrying at once could put two ticks less than an
  interval apart. It is tried again one interval later, like a late one.

The driver ``EpochTicker`` checks the grant (by its own monotonic clock,
no I/O) right before every write of a tick, the retries after a lost slot
included, so a holder that has lost the lease stops ticking at once (a
holder paused past its grant once lost its slot to the new holder's tick
and wrote the next one, two ticks a second apart); its ``stop()`` releases the lease, so a standby
takes over at its next poll rather than after a TTL. Renewals are the
lease manager's heartbeat, shared with the process's other leases.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from epochgc.errors import EpochGCError, LeaseLostError
from epochgc.leases.role_leases import LeaseManager
from epochgc.periodic import StepLoop
from epochgc.runtime import SYSTEM, Runtime

log = logging.getLogger(__name__)

TICKER_LEASE = "ticker"
"""The singleton lease whose holder ticks (``{root}/meta/leases/ticker``)."""


class TickAction(Enum):
    """What the ticker's driver does next."""

    TICK = "tick"
    """Held and due: append one ``epoch_tick`` now, then decide again."""
    WAIT = "wait"
    """Held, not due yet: sleep ``wait_seconds``, then decide again."""
    STANDBY = "standby"
    """Not held: try to take the lease, again after ``wait_seconds``."""


@dataclass(frozen=True)
class TickDecision:
    """A decision of ``TickSchedule.decide``."""

    action: TickAction
    wait_seconds: float
    """How long to sleep before deciding again (0 for ``TICK``)."""


@dataclass(frozen=True)
class TickSchedule:
    """When the holder of the ticker role ticks (see the module docstring).

    Example::

        schedule = TickSchedule(interval_seconds=60, poll_seconds=5)
        schedule.decide(100.0, held_since=40.0, last_tick_at=None).action
        # TickAction.TICK: held for a whole interval, never ticked

    Attributes:
        interval_seconds: ``[epoch] interval_seconds``: the least time
            between two ticks of one holder, and between acquiring the role
            and its first tick.
        poll_seconds: the longest sleep between two looks at the lease: a
            standby tries to take it, a holder notices it lost it (the
            lease renewal interval).
    """

    interval_seconds: float
    poll_seconds: float

    def __post_init__(self) -> None:
        if not self.interval_seconds > 0 or not self.poll_seconds > 0:
            raise ValueError(
                f"interval_seconds and poll_seconds must be > 0, got "
                f"interval_seconds={self.interval_seconds} poll_seconds={self.poll_seconds}"
            )

    def next_tick_at(self, *, held_since: float | None, last_tick_at: float | None) -> float | None:
        """When the next tick is due (monotonic seconds), or ``None`` when
        the role is not held.

        Args:
            held_since: when this process acquired the role; ``None``: not held.
            last_tick_at: when this process's last tick ended (success or
                failure); a tick from before ``held_since`` (an earlier
                holding) does not count, as others may have ticked since.
        """
        if held_since is None:
            return None
        since = held_since if last_tick_at is None else max(held_since, last_tick_at)
        return since + self.interval_seconds

    def decide(
        self, now: float, *, held_since: float | None, last_tick_at: float | None
    ) -> TickDecision:
        """What to do at monotonic time ``now``. Pure.

        Returns:
            ``STANDBY`` (wait ``poll_seconds``) when not held; ``TICK`` when
            due; else ``WAIT`` until due, at most ``poll_seconds``.
        """
        due = self.next_tick_at(held_since=held_since, last_tick_at=last_tick_at)
        if due is None:
            return TickDecision(TickAction.STANDBY, self.poll_seconds)
        if now >= due:
            return TickDecision(TickAction.TICK, 0.0)
        return TickDecision(TickAction.WAIT, min(due - now, self.poll_seconds))


class EpochTicker:
    """Holds the ticker role when it can, and ticks while it holds it.

    Example::

        leases = LeaseManager(store, "epochgc", "node-1")
        ticker = EpochTicker(leases, Controller(store, "epochgc").tick,
                             interval_seconds=60, poll_seconds=5)
        leases.start()      # the heartbeat renews the ticker lease too
        ticker.start()
        ...
        ticker.stop()       # last tick finished, lease released: immediate hand-over
        leases.stop()

    Args:
        leases: this process's lease manager (its heartbeat renews the lease).
        tick: appends one ``epoch_tick``; returns the new epoch. It is
            handed a check to call right before every write it tries
            (``Controller.tick``'s ``still_allowed``), which raises
            ``LeaseLostError`` once the role has run out.
        interval_seconds: ``[epoch] interval_seconds``.
        poll_seconds: how often a standby tries the lease (and a holder
            checks it still holds it); the lease renewal interval.
        monotonic: the monotonic clock (seconds); the runtime's by default.
        runtime: the worker ``start`` runs the steps on, and the lock and
            condition its waits and ``stop`` use.
    """

    def __init__(
        self,
        leases: LeaseManager,
        tick: Callable[[Callable[[], None]], int],
        *,
        interval_seconds: float,
        poll_seconds: float,
        lease_name: str = TICKER_LEASE,
        monotonic: Callable[[], float] | None = None,
        runtime: Runtime = SYSTEM,
    ) -> None:
        self._leases = leases
        self._tick = tick
        self._schedule = TickSchedule(interval_seconds, poll_seconds)
        self._name = lease_name
        self._monotonic = monotonic or runtime.monotonic
        self._held_since: float | None = None
        self._held_term: int | None = None
        self._last_tick_at: float | None = None
        self._loop = StepLoop(
            "epoch-ticker",
            self.run_once,
            first_wait=0.0,
            # A ticker that dies silently is worse than one that keeps trying.
            error_wait=self._schedule.poll_seconds,
            error_message="epoch ticker step failed; trying again",
            logger=log,
            runtime=runtime,
        )
        self.ticks = 0
        """Ticks this process appended (the new epoch came back)."""
        self.failures = 0
        """Ticks that failed (the append may still have landed)."""

    @property
    def held(self) -> bool:
        """This process holds the ticker role now (by its own clock)."""
        return self._leases.grant(self._name) is not None

    @property
    def holder(self) -> str:
        """This process's holder id in the lease object."""
        return self._leases.holder

    def run_once(self) -> float:
        """One step: follow the lease (notice a loss, try to take it when
        standing by), tick if due. Errors of the store are logged, counted
        and retried later; never raised.

        Returns:
            Seconds to sleep before the next step.
        """
        self._follow_lease()
        while True:
            decision = self._schedule.decide(
                self._monotonic(), held_since=self._held_since, last_tick_at=self._last_tick_at
            )
            if decision.action is not TickAction.TICK:
                return decision.wait_seconds
            self._tick_now()

    def _follow_lease(self) -> None:
        grant = self._leases.grant(self._name)
        if grant is not None and grant.term == self._held_term:
            return
        if grant is not None:  # a holding this driver has not seen begin
            self._begin_holding(grant.term)
            return
        if self._held_since is not None:
            log.warning("%s lost the ticker role: no more ticks from here", self.holder)
            self._held_since = self._held_term = None
        if self._loop.stopping:
            return
        try:
            grant = self._leases.try_acquire(self._name)
        except EpochGCError as err:
            log.warning("could not try the ticker lease: %s", err)
            return
        if grant is not None:
            self._begin_holding(grant.term)

    def _begin_holding(self, term: int) -> None:
        self._held_since, self._held_term = self._monotonic(), term
        log.info(
            "%s holds the ticker role (term %d): first tick in %.1fs",
            self.holder,
            term,
            self._schedule.interval_seconds,
        )

    def _tick_now(self) -> None:
        # The check is local (our monotonic clock against the grant), so it
        # sits right before the append: no tick once the grant has run out.
        if self._loop.stopping or not self.held:
            self._held_since = self._held_term = None
            return
        try:
            epoch = self._tick(self._still_holding)
        except EpochGCError as err:
            self.failures += 1
            log.warning("epoch tick failed (next try in one interval): %s", err)
        else:
            self.ticks += 1
            log.debug("epoch tick -> %d", epoch)
        finally:
            # After the append, not before: the next tick starts at least
            # one interval after this one has landed.
            self._last_tick_at = self._monotonic()

    def _still_holding(self) -> None:
        """Before each write of a tick: the grant must still be valid (a
        retry after a lost slot may come seconds after the first try)."""
        if self._loop.stopping or not self.held:
            raise LeaseLostError(f"{self.holder} no longer holds the ticker role")

    # --- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Start competing for the role and ticking on a worker of the
        runtime (a daemon thread in production).

        Raises:
            RuntimeError: already started.
        """
        self._loop.start()

    def stop(self, *, release: bool = True) -> None:
        """Stop ticking (a tick in flight finishes first), then release the
        lease so a standby takes over at once. Idempotent."""
        self._loop.stop()
        if release and self._held_since is not None:
            self._leases.release(self._name)
        self._held_since = self._held_term = None
