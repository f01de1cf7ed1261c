"""`Loop` pacing: idle backoff up to its ceiling, never past a due time, error backoff."""

from __future__ import annotations

import asyncio

from deckyard.clock import FakeClock
from deckyard.config import Settings
from deckyard.loop import ACTIVE, IDLE, MORE, Loop, Pacing, Tick
from tests.helpers.eventually import eventually


def pacing() -> Pacing:
    return Pacing(poll_interval=0.5, idle_ceiling=4.0, error_backoff=1.0, error_backoff_max=8.0)


def test_idle_waits_double_up_to_the_ceiling_and_work_resets_them() -> None:
    p = pacing()
    assert [p.after_tick(IDLE) for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert p.after_tick(ACTIVE) == 0.5
    assert p.after_tick(IDLE) == 0.5
    assert p.after_tick(IDLE) == 1.0


def test_more_ticks_again_at_once_without_touching_the_idle_backoff() -> None:
    p = pacing()
    p.after_tick(IDLE)
    p.after_tick(IDLE)
    assert p.after_tick(MORE) is None
    assert p.after_tick(IDLE) == 2.0


def test_never_waits_past_a_due_time() -> None:
    p = pacing()
    for _ in range(5):
        p.after_tick(IDLE)
    assert p.after_tick(Tick(due_in=0.25)) == 0.25
    assert p.after_tick(Tick(due_in=-3.0)) == 0.0
    assert p.after_tick(Tick(due_in=100.0)) == 4.0
    assert p.after_tick(Tick(active=True, due_in=0.1)) == 0.1


def test_error_backoff_doubles_to_its_maximum_and_a_good_tick_resets_it() -> None:
    p = pacing()
    assert [p.after_error() for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    p.after_tick(ACTIVE)
    assert p.after_error() == 1.0


async def test_a_failing_tick_is_counted_and_the_loop_goes_on() -> None:
    clock = FakeClock()
    calls = 0
    ticked = asyncio.Event()

    async def tick() -> Tick:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        ticked.set()
        return IDLE

    loop = Loop(
        "t",
        tick,
        subscription=None,
        poll_interval=0.01,
        idle_ceiling=0.01,
        error_backoff=0.01,
        error_backoff_max=0.01,
        clock=clock,
    )
    loop.start()
    try:
        async with asyncio.timeout(10):
            await ticked.wait()
        assert loop.stats.errors == 1
        assert loop.stats.last_error == "RuntimeError: boom"
        await eventually(lambda: _ticks(loop))
        assert loop.stats.last_tick_at == clock.now()
        assert loop.alive
    finally:
        await loop.stop()
    assert not loop.alive


async def _ticks(loop: Loop) -> bool:
    return loop.stats.ticks >= 1


def test_every_looks_at_one_cadence_busy_or_idle() -> None:
    async def tick() -> Tick:
        return IDLE

    settings = Settings(loop_error_backoff_seconds=2.0)
    loop = Loop.every("sweep", tick, settings, 30.0, clock=FakeClock())
    assert [loop.pacing.after_tick(IDLE) for _ in range(3)] == [30.0, 30.0, 30.0]
    assert loop.pacing.after_tick(ACTIVE) == 30.0
