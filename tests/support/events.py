"""Test helpers: channels that collect what a component published.

Example::

    found: list[str] = []
    seen = FutureTimeLog(events=found_into(found))   # document kinds
    lost: list[str] = []
    leases = LeaseManager(store, root, "node-a", events=lost_into(lost))  # lease names
"""

from __future__ import annotations

from epochgc.events import EventChannel
from epochgc.gc.future_times import FutureTimeFound
from epochgc.leases.role_leases import LeaseLost


def found_into(found: list[str]) -> EventChannel:
    """A new channel whose ``FutureTimeFound`` events append to ``found``."""
    events = EventChannel()
    events.subscribe(FutureTimeFound, lambda event: found.append(event.document))
    return events


def lost_into(lost: list[str]) -> EventChannel:
    """A new channel whose ``LeaseLost`` events append the lease's name to
    ``lost``."""
    events = EventChannel()
    events.subscribe(LeaseLost, lambda event: lost.append(event.name))
    return events
