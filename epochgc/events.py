"""The one way a component tells others what happened: it publishes a typed
event on an ``EventChannel``; whoever cares subscribes to that event's type.

Why one channel instead of a hook per need: each hook had its own shape and
its own plumbing (an attribute a sweeper overwrote on its store, a callable
passed three calls deep, a store wrapper proxying the attribute), so
observing one more thing meant another parameter through every layer, and a
wrapper that forgot a proxy silently cut the wire. Here a component takes
``events: EventChannel`` and publishes; the wiring subscribes observers.

The events are frozen dataclasses deriving from ``Event``, each defined
beside the component that publishes it (this module is a foundation and
knows no domain type):

* ``storage.object_store.Throttled``: the store got a SlowDown/throttling
  answer (``storage.s3``; ``verify.faults`` for an injected SlowDown); the
  sweeper's rate controller listens while it sweeps.
* ``gc.sweeper.ObjectsPlanned``: a dry run's batch of eligible objects
  (the plan file is written from it).
* ``gc.sweeper.DeleteBatchDone``: a DeleteObjects batch's outcome (the
  deletion record, a Spark task's running totals).
* ``gc.spark.tasks.ClientCreated``: a Spark task made a boto3 client
  (benchmarks and fault-injection tests attach botocore handlers to it).
* ``reconciler.node.ReconcilerRoundEnded``: a reconciler round's duration
  (the round-duration histogram).
* ``gc.pause.HeldJobsChanged``: the jobs a pause holds changed (the
  daemon republishes its status).
* ``gc.future_times.FutureTimeFound``: a document was read holding a time
  from the future (the clock-skew counter).
* ``gc.daemon.control_poll.CollectorStateChanged``: the control document
  paused, resumed or reset the collector (the daemon stops the sweep,
  runs the held jobs, triggers a round).
* ``leases.role_leases.LeaseLost``: a role lease was lost (the daemon goes
  to standby).
* ``ingest.producer.Acknowledged``: one ``produce`` call's latency (the
  producer latency histogram).
* ``watermarks.controller.EpochAdvanceStarted`` and ``EpochTicked``: an
  ``epoch advance`` began and moved on (its progress line).

Delivery is synchronous, on the publishing thread, to the subscribers of
the event's type (or a base of it) in the order they subscribed. A
subscriber's exception propagates to the publisher at once, and the later
subscribers do not see that event: exactly what a direct call did, which is
what every replaced hook was. That one rule holds for every event because
the records need it (a plan or a deletion record that cannot be written
must fail the run, not leave a run that deleted without a record) and the
observations lose nothing by it (a rate controller or a histogram does not
raise; a client set-up that fails must fail the task, as a test's injected
import error does). A subscriber that wants to survive its own failures
catches them itself.

Thread safety: publishers are pool threads; subscribing happens at wiring
time but may come at any moment (a sweep subscribes for its duration). The
subscriptions are an immutable tuple replaced under a lock, so ``publish``
reads one snapshot without locking and a subscriber may subscribe or
unsubscribe from inside a delivery. A subscriber called from several
threads at once serialises itself (the ``DeletionRecord`` has its own lock);
the sweeper publishes ``ObjectsPlanned`` one at a time.

A channel pickles with its subscribers (a Spark job ships its observers to
the tasks in ``TaskSpec``); each unpickled copy is independent.

Example::

    events = EventChannel()
    store = S3ObjectStore(client, bucket, events=events)   # publishes Throttled
    sweeper = Sweeper(store, root, policy, events=events)  # listens to it while sweeping
    with events.subscribed(ObjectsPlanned, plan.on_planned):
        sweeper.sweep(shards, m, now, dry_run=True, plan=True)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

__all__ = ["Event", "EventChannel", "Subscriber"]

E = TypeVar("E", bound="Event")
E_contra = TypeVar("E_contra", bound="Event", contravariant=True)


class Event:
    """The base of every event (subscribing to ``Event`` sees them all)."""

    __slots__ = ()


class Subscriber(Protocol[E_contra]):
    """Called with each published event of the type it subscribed to."""

    def __call__(self, event: E_contra, /) -> None: ...


class _Subscription:
    """One subscription: its own object, so the same callable subscribed
    twice is two subscriptions, each cancelled on its own."""

    __slots__ = ("kind", "subscriber")

    def __init__(self, kind: type[Event], subscriber: Subscriber[Any]) -> None:
        self.kind = kind
        self.subscriber = subscriber


class EventChannel:
    """Fans each published event out to the subscribers of its type.

    A new channel has no subscribers: publishing on it costs a tuple scan.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: tuple[_Subscription, ...] = ()

    def subscribe(self, kind: type[E], subscriber: Subscriber[E]) -> None:
        """Deliver every later event of type ``kind`` (or a subtype) to
        ``subscriber``, for the channel's lifetime (wiring time)."""
        self._add(_Subscription(kind, subscriber))

    @contextmanager
    def subscribed(self, kind: type[E], subscriber: Subscriber[E]) -> Iterator[None]:
        """``subscribe`` for the duration of a ``with`` block: a sweep's
        rate controller, or a record kept for one run, must not outlive it
        on a channel that does."""
        subscription = _Subscription(kind, subscriber)
        self._add(subscription)
        try:
            yield
        finally:
            with self._lock:
                self._subscriptions = tuple(s for s in self._subscriptions if s is not subscription)

    def publish(self, event: Event) -> None:
        """Call each subscriber of ``event``'s type, in subscription order,
        on this thread. A subscriber's exception propagates (module
        docstring); the subscribers after it do not see ``event``."""
        for subscription in self._subscriptions:
            if isinstance(event, subscription.kind):
                subscription.subscriber(event)

    def _add(self, subscription: _Subscription) -> None:
        with self._lock:
            self._subscriptions = (*self._subscriptions, subscription)

    def __getstate__(self) -> tuple[tuple[type[Event], Subscriber[Any]], ...]:
        return tuple((s.kind, s.subscriber) for s in self._subscriptions)

    def __setstate__(self, state: tuple[tuple[type[Event], Subscriber[Any]], ...]) -> None:
        self._lock = threading.Lock()
        self._subscriptions = tuple(_Subscription(kind, sub) for kind, sub in state)
