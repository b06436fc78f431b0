"""Test helper: a channel that collects the kinds of the documents a
``FutureTimeLog`` found holding a time from the future.

Example::

    found: list[str] = []
    seen = FutureTimeLog(events=found_into(found))
"""

from __future__ import annotations

from epochgc.events import EventChannel
from epochgc.gc.future_times import FutureTimeFound


def found_into(found: list[str]) -> EventChannel:
    """A new channel whose ``FutureTimeFound`` events append to ``found``."""
    events = EventChannel()
    events.subscribe(FutureTimeFound, lambda event: found.append(event.document))
    return events
