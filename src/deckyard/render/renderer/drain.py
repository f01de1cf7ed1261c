"""A renderer's drain: no new attempts, in-flight ones finish within a bound, then it exits.

A drain begins on SIGTERM (`main.py`) or on the control plane's signed `POST /v1/drain`, and
never ends any other way than with the process. From then on:

1. every new attempt is refused (429 `RENDER_NO_FREE_SLOT`, which the control plane does not
   count against the request) and no deck attempt starts another page;
2. the attempts in flight run on until they end, for at most `renderer_drain_timeout_seconds`;
   whatever still runs then is handed back: it ends `RENDER_WORKER_STOPPED`, and a deck
   attempt's receipt lists the pages it finished, so the deck resumes elsewhere from there;
3. the renderer keeps answering until the outcome (receipt and artefacts) of every attempt
   that was in flight when the drain began was fetched, each for at most
   `renderer_drain_collect_seconds` from its end, unless a control plane releases it first
   (`{"release": true}`: none of its attempts there holds a slot any more). Results that had
   ended before are their requester's to fetch: a control plane does within moments, and one
   lost to the exit is retried (at no cost once the row says draining);
4. `on_end` runs: the process prints `{"event": "drained"}` and exits 0, which its supervisor
   reads as a rolling restart, not a crash.

The waits are woken by attempt endings and by results being served, never by a timed poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.render.renderer.registry import AttemptRegistry

log = logging.getLogger(__name__)


class Drain:
    """The drain of one renderer process; see the module docstring."""

    def __init__(
        self, registry: AttemptRegistry, settings: Settings, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._registry = registry
        self._settings = settings
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._poked = asyncio.Event()
        self._deadline: float | None = None
        self._in_flight: set[str] = set()
        self.released = False
        self.handed_back = 0
        self.on_begin: Callable[[], None] = lambda: None
        """Runs once, when the drain begins (the process announces it)."""
        self.on_end: Callable[[], None] = lambda: None
        """Runs once, when the drain is over (the process exits)."""
        registry.on_collected = self.poke

    @property
    def draining(self) -> bool:
        """Whether a drain has begun."""
        return self._task is not None

    def begin(self) -> bool:
        """Begin draining; False when a drain had already begun (every call is safe)."""
        if self._task is not None:
            return False
        self._registry.draining = True
        self._in_flight = self._registry.active_ids()
        timeout = self._settings.renderer_drain_timeout_seconds
        self._deadline = self._clock.monotonic() + timeout
        log.warning(
            "draining: no new attempts; %d in flight get up to %gs",
            self._registry.active,
            timeout,
        )
        self._task = asyncio.get_running_loop().create_task(self._run(), name="renderer drain")
        self.on_begin()
        return True

    def release(self) -> None:
        """A control plane holds nothing here any more: end the drain without waiting."""
        self.released = True
        self.poke()

    def poke(self) -> None:
        """Something the drain waits for may have happened (a result was served)."""
        self._poked.set()

    def status(self) -> dict[str, Any]:
        """What `POST /v1/drain` answers."""
        left = None
        if self._deadline is not None:
            left = max(0.0, round(self._deadline - self._clock.monotonic(), 3))
        return {
            "draining": self.draining,
            "active": self._registry.active,
            "uncollected": len(self._registry.uncollected(self._in_flight)),
            "released": self.released,
            "remaining_seconds": left,
        }

    async def stop(self) -> None:
        """Cancel a drain still waiting (the process stops at once instead)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        registry = self._registry
        assert self._deadline is not None
        await self._until(lambda: registry.active == 0, self._deadline)
        if registry.active:
            self.handed_back = await registry.hand_back()
            log.warning("drain bound passed: %d attempt(s) handed back", self.handed_back)
        waited = self._in_flight
        ended = [a.finished_at or 0.0 for a in registry.uncollected(waited)]
        collect_until = max(ended, default=0.0) + self._settings.renderer_drain_collect_seconds
        await self._until(lambda: not registry.uncollected(waited), collect_until)
        left = registry.uncollected(waited)
        if left and not self.released:
            log.warning("drained with %d result(s) nobody fetched", len(left))
        log.info("drained (%d handed back)", self.handed_back)
        self.on_end()

    async def _until(self, done: Callable[[], bool], deadline: float) -> None:
        """Wait until `done()`, a release or `deadline` (on the clock's monotonic time)."""
        while True:
            self._poked.clear()
            seen = self._registry.changes.count
            left = deadline - self._clock.monotonic()
            if done() or self.released or left <= 0:
                return
            poked = asyncio.ensure_future(self._poked.wait())
            moved = asyncio.ensure_future(self._registry.changes.wait_past(seen, left))
            try:
                await asyncio.wait({poked, moved}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (poked, moved):
                    task.cancel()
                await asyncio.gather(poked, moved, return_exceptions=True)
