"""`Loop`: how every background loop runs: wakeups, idle backoff, due times, loud failures."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime

from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.db import Subscription, current_loop

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tick:
    """What a tick reports: whether it did work, whether more is ready, and when it is next due.

    `due_in` is an upper bound on the next sleep: the loop never sleeps past it.
    """

    active: bool = False
    more: bool = False
    due_in: float | None = None


IDLE = Tick()
ACTIVE = Tick(active=True)
MORE = Tick(active=True, more=True)


@dataclass
class Pacing:
    """How long a loop waits after each tick: pure arithmetic, tested without sleeping.

    After a tick that did work: `poll_interval`. While idle: from `poll_interval`, doubling up
    to `idle_ceiling`. Never past a tick's `due_in`. After `more`: no wait at all (None). After
    a failed tick: `error_backoff`, doubling up to `error_backoff_max`, reset by a good tick.
    """

    poll_interval: float
    idle_ceiling: float
    error_backoff: float
    error_backoff_max: float
    _idle: float = field(init=False)
    _error: float = field(init=False)

    def __post_init__(self) -> None:
        self._idle = self.poll_interval
        self._error = self.error_backoff

    def after_tick(self, result: Tick) -> float | None:
        """Seconds to wait after a tick that returned `result`; None to tick again at once."""
        self._error = self.error_backoff
        if result.more:
            return None
        if result.active:
            self._idle = self.poll_interval
            wait = self.poll_interval
        else:
            wait = self._idle
            self._idle = min(self._idle * 2, self.idle_ceiling)
        if result.due_in is not None:
            wait = min(wait, max(result.due_in, 0.0))
        return wait

    def after_error(self) -> float:
        """Seconds to wait after a tick that raised."""
        wait = self._error
        self._error = min(self._error * 2, self.error_backoff_max)
        return wait


@dataclass
class LoopStats:
    """A loop's health, for readiness and metrics."""

    ticks: int = 0
    errors: int = 0
    last_tick_at: datetime | None = None
    last_error: str | None = None
    durations: deque[float] = field(default_factory=lambda: deque(maxlen=1024))


class Loop:
    """Runs `tick` forever: after wakeups, on active polls, and with backoff while idle.

    While ticks do work, the loop ticks again after `poll_interval` (at once when a tick says
    `more`). While idle, the wait doubles from `poll_interval` up to `idle_ceiling`; a wakeup on
    `subscription` (or `poke()`) ends any wait. A tick that raises is logged with its traceback,
    counted, and retried after an exponential error backoff; it never ends the loop.
    """

    def __init__(
        self,
        name: str,
        tick: Callable[[], Awaitable[Tick]],
        *,
        subscription: Subscription | None,
        poll_interval: float,
        idle_ceiling: float,
        error_backoff: float,
        error_backoff_max: float,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.name = name
        self._tick = tick
        self._sub = subscription
        self._poke = asyncio.Event()
        self.pacing = Pacing(poll_interval, idle_ceiling, error_backoff, error_backoff_max)
        self.clock = clock
        self.stats = LoopStats()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    @classmethod
    def configured(
        cls,
        name: str,
        tick: Callable[[], Awaitable[Tick]],
        settings: Settings,
        *,
        poll_interval: float,
        idle_ceiling: float,
        subscription: Subscription | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> Loop:
        """A loop whose error backoff comes from settings, as every Deckyard loop's does."""
        return cls(
            name,
            tick,
            subscription=subscription,
            poll_interval=poll_interval,
            idle_ceiling=idle_ceiling,
            error_backoff=settings.loop_error_backoff_seconds,
            error_backoff_max=max(
                settings.loop_error_backoff_max_seconds, settings.loop_error_backoff_seconds
            ),
            clock=clock,
        )

    @classmethod
    def every(
        cls,
        name: str,
        tick: Callable[[], Awaitable[Tick]],
        settings: Settings,
        seconds: float,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> Loop:
        """A housekeeping loop that looks every `seconds`, busy or idle (prune, sweep)."""
        return cls.configured(
            name, tick, settings, poll_interval=seconds, idle_ceiling=seconds, clock=clock
        )

    @property
    def alive(self) -> bool:
        """True while the loop's task runs."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the loop as a task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"loop:{self.name}")

    async def stop(self) -> None:
        """Stop after the current tick; waits for it to end."""
        self._stopping = True
        self.poke()
        if self._task is not None:
            task, self._task = self._task, None
            try:
                async with asyncio.timeout(30):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def poke(self) -> None:
        """Wake the loop now."""
        self._poke.set()

    async def _wait(self, timeout: float) -> None:
        if self._poke.is_set():
            self._poke.clear()
            return
        if self._sub is not None and self._sub.pending():
            await self._sub.wait(0)
            return
        waiters: list[asyncio.Future[bool]] = [asyncio.ensure_future(self._poke.wait())]
        if self._sub is not None:
            waiters.append(asyncio.ensure_future(self._sub.wait(None)))
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
        self._poke.clear()

    async def _run(self) -> None:
        token = current_loop.set(self.name)
        try:
            while not self._stopping:
                started = time.perf_counter()
                try:
                    result = await self._tick()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.stats.errors += 1
                    self.stats.last_error = f"{type(exc).__name__}: {exc}"[:500]
                    error_wait = self.pacing.after_error()
                    log.exception("loop %s: tick failed; retrying in %.2fs", self.name, error_wait)
                    await self._wait(error_wait)
                    continue
                self.stats.ticks += 1
                self.stats.last_tick_at = self.clock.now()
                self.stats.durations.append(time.perf_counter() - started)
                if self._stopping:
                    break
                wait = self.pacing.after_tick(result)
                if wait is None:
                    await asyncio.sleep(0)
                    continue
                await self._wait(wait)
        finally:
            current_loop.reset(token)
