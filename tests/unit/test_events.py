"""The event channel: fan-out by type in subscription order, a subscriber's
error reaching the publisher, scoped subscriptions, pickling, and
publishing from several threads while others subscribe."""

from __future__ import annotations

import pickle
import threading
from dataclasses import dataclass

import pytest

from epochgc.events import Event, EventChannel


@dataclass(frozen=True)
class Ping(Event):
    n: int


@dataclass(frozen=True)
class LoudPing(Ping):
    pass


@dataclass(frozen=True)
class Pong(Event):
    n: int


@dataclass
class Collect:
    """A picklable subscriber (module level, plain fields)."""

    seen: list[int]

    def __call__(self, event: Ping) -> None:
        self.seen.append(event.n)


def test_each_event_reaches_the_subscribers_of_its_type_in_subscription_order() -> None:
    channel = EventChannel()
    calls: list[str] = []
    channel.subscribe(Ping, lambda e: calls.append(f"a{e.n}"))
    channel.subscribe(Pong, lambda e: calls.append(f"pong{e.n}"))
    channel.subscribe(Ping, lambda e: calls.append(f"b{e.n}"))
    channel.subscribe(Event, lambda e: calls.append(f"all:{type(e).__name__}"))
    channel.publish(Ping(1))
    channel.publish(Pong(2))
    channel.publish(LoudPing(3))  # a subtype reaches its base's subscribers
    assert calls == [
        "a1",
        "b1",
        "all:Ping",
        "pong2",
        "all:Pong",
        "a3",
        "b3",
        "all:LoudPing",
    ]


def test_a_channel_without_subscribers_takes_any_event() -> None:
    EventChannel().publish(Ping(1))


def test_a_subscriber_error_reaches_the_publisher_and_stops_the_fan_out() -> None:
    channel = EventChannel()
    after: list[int] = []

    def broken(_event: Ping) -> None:
        raise OSError("disk full")

    channel.subscribe(Ping, broken)
    channel.subscribe(Ping, lambda e: after.append(e.n))
    with pytest.raises(OSError, match="disk full"):
        channel.publish(Ping(1))
    assert after == [], "a record that failed must fail its publisher, as a direct call did"


def test_a_scoped_subscription_ends_with_its_block_even_on_error() -> None:
    channel = EventChannel()
    seen: list[int] = []
    with channel.subscribed(Ping, lambda e: seen.append(e.n)):
        channel.publish(Ping(1))
    channel.publish(Ping(2))
    with pytest.raises(RuntimeError), channel.subscribed(Ping, lambda e: seen.append(e.n)):
        raise RuntimeError("the sweep failed")
    channel.publish(Ping(3))
    assert seen == [1]


def test_the_same_subscriber_twice_is_two_subscriptions_cancelled_one_at_a_time() -> None:
    channel = EventChannel()
    seen: list[int] = []

    def add(event: Ping) -> None:
        seen.append(event.n)

    channel.subscribe(Ping, add)
    with channel.subscribed(Ping, add):
        channel.publish(Ping(1))
    channel.publish(Ping(2))
    assert seen == [1, 1, 2]


def test_a_channel_pickles_with_its_subscribers_and_each_copy_is_its_own() -> None:
    channel = EventChannel()
    channel.subscribe(Ping, Collect([]))
    copy = pickle.loads(pickle.dumps(channel))
    copy.subscribe(Pong, lambda e: None)  # the copy has a working lock
    copy.publish(Ping(7))
    (subscription,) = [s for s in copy._subscriptions if s.kind is Ping]
    assert isinstance(subscription.subscriber, Collect)
    assert subscription.subscriber.seen == [7]
    channel.publish(Ping(8))
    assert subscription.subscriber.seen == [7], "the original's subscriber is another object"


def test_publishers_on_several_threads_while_others_subscribe_lose_nothing() -> None:
    channel = EventChannel()
    lock = threading.Lock()
    seen: list[int] = []

    def add(event: Ping) -> None:
        with lock:
            seen.append(event.n)

    channel.subscribe(Ping, add)
    start = threading.Barrier(6)
    late: list[list[int]] = [[] for _ in range(2)]

    def publish(base: int) -> None:
        start.wait()
        for i in range(2000):
            channel.publish(Ping(base + i))

    def subscribe(into: list[int]) -> None:
        def note(event: Ping) -> None:
            into.append(event.n)

        start.wait()
        for _ in range(200):
            with channel.subscribed(Ping, note):
                pass
        channel.subscribe(Ping, note)

    threads = [threading.Thread(target=publish, args=(k * 10_000,)) for k in range(4)]
    threads += [threading.Thread(target=subscribe, args=(late[k],)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seen) == sorted(k * 10_000 + i for k in range(4) for i in range(2000))
    assert len(channel._subscriptions) == 3, "every scoped subscription was removed"
    channel.publish(Ping(-1))
    assert all(into[-1] == -1 for into in late)
