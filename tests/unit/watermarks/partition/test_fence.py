"""The leader's epoch fence: sharing, sliding, rejecting, re-checking."""

from __future__ import annotations

import asyncio

import pytest

from epochgc.errors import StaleEpochError
from epochgc.watermarks.partition.fence import EpochFence
from epochgc.watermarks.partition.window import EpochWindow, Position

N = 100


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_window_arithmetic() -> None:
    window = EpochWindow(5, 6)
    assert [window.position(e) for e in (4, 5, 6, 7)] == [
        Position.BELOW,
        Position.INSIDE,
        Position.INSIDE,
        Position.ABOVE,
    ]
    assert window.slide(10) == EpochWindow(6, 10)
    assert window.slide(10).size == 5
    with pytest.raises(ValueError):
        window.slide(6)
    with pytest.raises(ValueError):
        EpochWindow(7, 6)


def test_window_n_then_n_plus_1_then_n_plus_2() -> None:
    async def scenario() -> list[EpochWindow]:
        fence = EpochFence(EpochWindow(N, N))
        seen = []
        for epoch in (N, N + 1, N + 2):
            async with fence.admit(epoch) as window:
                seen.append(window)
        return seen

    assert run(scenario()) == [EpochWindow(N, N), EpochWindow(N, N + 1), EpochWindow(N + 1, N + 2)]


def test_out_of_order_arrivals_accept_reject_accept() -> None:
    """A partition at revision N+1 (window [N+1, N+1]) sees N+1, N, N+2."""

    async def scenario() -> tuple[list[str], EpochFence]:
        fence = EpochFence(EpochWindow(N + 1, N + 1))
        results = []
        for epoch in (N + 1, N, N + 2):
            try:
                async with fence.admit(epoch):
                    results.append("accept")
            except StaleEpochError:
                results.append("reject")
        return results, fence

    results, fence = run(scenario())
    assert results == ["accept", "reject", "accept"]
    assert fence.window == EpochWindow(N + 1, N + 2)


def test_rejection_carries_the_window_and_is_counted() -> None:
    async def scenario() -> tuple[StaleEpochError, EpochFence]:
        fence = EpochFence(EpochWindow(N, N + 1))
        with pytest.raises(StaleEpochError) as info:
            await fence.acquire(N - 3)
        return info.value, fence

    error, fence = run(scenario())
    assert (error.epoch, error.window_previous, error.window_max) == (N - 3, N, N + 1)
    assert fence.stats.rejected_below == 1
    assert fence.stats.last_rejection_gap == 3


def test_non_contiguous_epochs() -> None:
    async def scenario() -> EpochFence:
        fence = EpochFence(EpochWindow(5, 6))
        async with fence.admit(10):
            pass
        for epoch in (6, 7, 8, 9, 10):
            async with fence.admit(epoch):
                pass
        return fence

    fence = run(scenario())
    assert fence.window == EpochWindow(6, 10)
    assert fence.stats.accepted_same_epoch == 5
    assert fence.stats.window_slides == 1


def test_fences_of_one_epoch_proceed_together() -> None:
    async def scenario() -> int:
        fence = EpochFence(EpochWindow(N, N + 1))
        inside = 0
        peak = 0
        gate = asyncio.Event()

        async def writer() -> None:
            nonlocal inside, peak
            async with fence.admit(N + 1):
                inside += 1
                peak = max(peak, inside)
                await gate.wait()
                inside -= 1

        tasks = [asyncio.create_task(writer()) for _ in range(5)]
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.gather(*tasks)
        return peak

    assert run(scenario()) == 5


def test_a_new_epoch_waits_for_in_flight_holders_then_slides() -> None:
    async def scenario() -> list[str]:
        fence = EpochFence(EpochWindow(N, N + 1))
        events: list[str] = []
        release_old = asyncio.Event()

        async def old_writer() -> None:
            async with fence.admit(N + 1):
                events.append("old admitted")
                await release_old.wait()
                events.append("old released")

        async def new_writer() -> None:
            async with fence.admit(N + 2) as window:
                events.append(f"new admitted {window}")

        old = asyncio.create_task(old_writer())
        await asyncio.sleep(0.01)
        new = asyncio.create_task(new_writer())
        await asyncio.sleep(0.01)
        events.append(f"window while waiting {fence.window}")
        release_old.set()
        await asyncio.gather(old, new)
        return events

    assert run(scenario()) == [
        "old admitted",
        f"window while waiting {EpochWindow(N, N + 1)}",
        "old released",
        f"new admitted {EpochWindow(N + 1, N + 2)}",
    ]


def test_a_request_that_waited_is_judged_against_the_moved_window() -> None:
    """A write of N arrives while a slide to N+2 is waiting: slides have
    priority, so it waits, and after the slide N is below the window."""

    async def scenario() -> list[str]:
        fence = EpochFence(EpochWindow(N, N + 1))
        outcome: list[str] = []
        release = asyncio.Event()

        async def holder() -> None:
            async with fence.admit(N + 1):
                await release.wait()

        async def writer(epoch: int) -> None:
            try:
                async with fence.admit(epoch):
                    outcome.append(f"{epoch} accepted")
            except StaleEpochError:
                outcome.append(f"{epoch} rejected")

        h = asyncio.create_task(holder())
        await asyncio.sleep(0.01)
        slide = asyncio.create_task(writer(N + 2))
        await asyncio.sleep(0.01)
        late = asyncio.create_task(writer(N))
        await asyncio.sleep(0.01)
        assert outcome == [], "both wait while the holder is in flight"
        release.set()
        await asyncio.gather(h, slide, late)
        return outcome

    assert set(run(scenario())) == {f"{N + 2} accepted", f"{N} rejected"}


def test_two_slides_in_a_row() -> None:
    async def scenario() -> EpochFence:
        fence = EpochFence(EpochWindow(5, 6))
        release = asyncio.Event()

        async def hold(epoch: int) -> None:
            async with fence.admit(epoch):
                await release.wait()

        tasks = [asyncio.create_task(hold(e)) for e in (6, 7, 8)]
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*tasks)
        return fence

    fence = run(scenario())
    assert fence.window == EpochWindow(7, 8)
    assert fence.stats.window_slides == 2
    assert fence._shared == 0


def test_cancelled_requests_leave_no_holder_and_block_nothing() -> None:
    """Producers time out (``wait_for``) while they hold access, while they
    wait to slide and while they wait behind a slide; afterwards the fence
    is as if they had never come, so housekeeping can still slide it."""

    async def scenario() -> EpochFence:
        fence = EpochFence(EpochWindow(N, N))
        holding = asyncio.Event()

        async def hold_forever() -> None:
            async with fence.admit(N):
                holding.set()
                await asyncio.Event().wait()

        holder = asyncio.create_task(hold_forever())
        await holding.wait()
        slider = asyncio.create_task(fence.acquire(N + 1))  # waits for the holder
        await asyncio.sleep(0)
        behind = asyncio.create_task(fence.acquire(N))  # waits behind the slide
        await asyncio.sleep(0)
        for task in (slider, behind, holder):
            task.cancel()
        await asyncio.gather(slider, behind, holder, return_exceptions=True)
        assert fence._shared == 0
        # Nothing left behind: a slide and a same-epoch request get through at once.
        async with asyncio.timeout(1):
            async with fence.admit(N + 2) as window:
                assert window == EpochWindow(N, N + 2)
            async with fence.admit(N + 2):
                pass
        return fence

    fence = run(scenario())
    assert fence._shared == 0


def test_a_cancelled_slide_lets_the_requests_behind_it_in() -> None:
    async def scenario() -> None:
        fence = EpochFence(EpochWindow(N, N))
        await fence.acquire(N)  # a holder that stays
        slider = asyncio.create_task(fence.acquire(N + 1))
        await asyncio.sleep(0)
        behind = asyncio.create_task(fence.acquire(N))
        await asyncio.sleep(0)
        assert not behind.done()  # held back by the waiting slide
        slider.cancel()
        async with asyncio.timeout(1):
            assert await behind == EpochWindow(N, N)
        assert fence._shared == 2

    run(scenario())
