"""The render pipeline's composition root: `RenderNode` builds Database → Runtime → tasks →
render control plane → decks, starts them in that order (migrating first when
`migrate_on_start` is set) and stops them in reverse; added components start last and stop
first. `deckyard render` and `validate` run one. `deckyard.node.Node` adds AI, external workers,
retention and webhooks (what `serve`, the API and `baseline` run); they live in that module so
a render imports none of them (their modules are neither loaded nor built for a run that never
uses them). Nothing here knows about HTTP.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Protocol, Self

from deckyard import __version__
from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.db.migrate import upgrade
from deckyard.decks.jobs.names import DECK_QUEUE
from deckyard.decks.service import DeckService
from deckyard.jobs import Runtime
from deckyard.loop import Loop
from deckyard.render.control.service import RenderService
from deckyard.tasks import TaskExecutor

log = logging.getLogger(__name__)


class Component(Protocol):
    """A long-lived part that runs background loops between `start()` and `stop()`."""

    @property
    def loops(self) -> list[Loop]:
        """Its loops, once started."""
        ...

    def start(self) -> None:
        """Start its loops."""
        ...

    async def stop(self) -> None:
        """Stop its loops."""
        ...


class RenderNode:
    """The components a render pipeline needs, wired together: database, job runtime, tasks,
    the render control plane and decks (what `deckyard render` and `validate` run).

    Construction opens nothing but the engine (the database is touched in `start()`); handlers
    and workers are registered then, so `runtime.handlers` is complete before anything runs.
    With `settings.background_loops` off, components start without their loops (a read-only
    API process) and no renderer is supervised.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.db = Database.from_settings(settings)
        self.runtime = Runtime(self.db, settings=settings, clock=clock, migrate=False)
        self.tasks = TaskExecutor(self.db, self.runtime, settings, clock=clock)
        self.render = RenderService(
            self.db,
            self.runtime,
            settings,
            clock=clock,
            supervise=None if settings.background_loops else False,
        )
        self.decks = DeckService(
            self.db, self.runtime, self.render, self.tasks, settings, clock=clock
        )
        self._build_more()
        self._workers()
        self.extras: list[Component] = []
        self.started = False

    def _build_more(self) -> None:
        """Build the components beyond the render pipeline (`Node`'s), before the workers."""

    def _workers(self) -> None:
        """Register the job workers: every queue with a handler but the deck queue's, then the
        deck queue's (`deck_job_concurrency`)."""
        self._other_queues_worker()
        self.runtime.worker([DECK_QUEUE], concurrency=self.settings.deck_job_concurrency)

    def _other_queues_worker(self, own_workers: frozenset[str] = frozenset()) -> None:
        """One worker for every queue with a handler but the deck queue and `own_workers` (the
        queues a subclass gives workers of their own)."""
        queues = {h.queue for h in self.runtime.handlers.values()}
        if rest := sorted(queues - {DECK_QUEUE} - own_workers):
            # every other queue with a handler (an empty list would mean every queue)
            self.runtime.worker(rest)

    @property
    def services(self) -> list[Component]:
        """The components beyond the render pipeline that run loops (`Node`'s), started after
        the render control plane and before the extras."""
        return []

    def add(self, component: Component) -> None:
        """Run `component` too: started after the rest, stopped before them."""
        if self.started:
            raise RuntimeError("add components before the node starts")
        self.extras.append(component)

    @property
    def loop_owners(self) -> list[Runtime | TaskExecutor | RenderService | Component]:
        """Every component that runs loops, in start order (for `/readyz`, metrics, baseline)."""
        return [self.runtime, self.tasks, self.render, *self.services, *self.extras]

    @property
    def loops(self) -> list[Loop]:
        """Every background loop of every component."""
        return [loop for owner in self.loop_owners for loop in owner.loops]

    async def start(self) -> None:
        """Migrate (when configured), then start runtime, tasks, render, the services and the
        extras in that order."""
        if self.started:
            return
        s = self.settings
        if s.migrate_on_start:
            await upgrade(self.db)
        await self.runtime.start(run_loops=s.background_loops)
        await self.tasks.start(run_loops=s.background_loops)
        if s.background_loops:
            await self.render.start()
            for component in [*self.services, *self.extras]:
                component.start()
        self.started = True
        log.info(
            "deckyard %s ready on %s; loops: %s",
            __version__,
            self.db.display_name,
            ", ".join(lp.name for lp in self.runtime.loops if lp.alive) or "none",
        )

    async def stop(self) -> None:
        """Stop everything in reverse start order and close the database."""
        try:
            for component in reversed([*self.services, *self.extras]):
                await component.stop()
            await self.render.stop()
            await self.tasks.stop()
            await self.runtime.stop()
            await self._close_more()
            await self.decks.close()
        finally:
            await self.db.dispose()
            self.started = False

    async def _close_more(self) -> None:
        """Close what the components beyond the render pipeline hold (clients)."""

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
