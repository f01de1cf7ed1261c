"""The composition root of a whole Deckyard process: `Node` is the render pipeline
(`deckyard.render_node.RenderNode`) plus AI, the external-worker protocol, retention and
webhooks, started after the render control plane and stopped before it. The API's lifespan and
`deckyard baseline` run a `Node` (the API only adds HTTP on top; its housekeeping loop joins
through `Node.add`). Nothing here knows about HTTP.
"""

from __future__ import annotations

from deckyard.ai.errors import AI_QUEUE
from deckyard.ai.service import AiService
from deckyard.decks.jobs.names import DECK_QUEUE
from deckyard.decks.retention import Retention
from deckyard.external.protocol import ExternalWorkers
from deckyard.render_node import Component, RenderNode
from deckyard.webhooks import WEBHOOK_QUEUE
from deckyard.webhooks.service import WebhookService


class Node(RenderNode):
    """Every component of one Deckyard process: the render pipeline (`RenderNode`), and AI,
    external workers, retention and webhooks (what `deckyard serve` and the API run)."""

    def _build_more(self) -> None:
        settings, clock = self.settings, self.clock
        self.ai = AiService(self.db, self.runtime, self.decks, settings, clock=clock)
        self.external = ExternalWorkers(self.runtime, settings)
        self.retention = Retention(self.db, self.render.store, settings, clock)
        self.webhooks = WebhookService(
            self.db, self.runtime, settings, clock, renders=self.render.kept_finished_after
        )

    def _workers(self) -> None:
        settings = self.settings
        self._other_queues_worker(frozenset({AI_QUEUE, WEBHOOK_QUEUE}))
        self.runtime.worker([WEBHOOK_QUEUE], concurrency=settings.webhook_concurrency)
        self.runtime.worker([DECK_QUEUE], concurrency=settings.deck_job_concurrency)
        if self.ai.configured:
            self.runtime.worker([AI_QUEUE], concurrency=settings.ai_job_concurrency)

    @property
    def services(self) -> list[Component]:
        return [self.retention, self.webhooks]

    async def _close_more(self) -> None:
        await self.ai.close()
