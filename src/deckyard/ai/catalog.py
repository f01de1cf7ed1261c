"""The `ai.catalog_sync` job: the provider's `GET /models` into `ai_models`, written on change.

It runs on the runtime's cron (`DECKYARD_AI_CATALOG_CRON`). It reads the stored catalog first
and writes only the difference, inside the job's finish (so an unchanged list writes nothing
beyond the job's own row). A failing provider fails that run, which is logged and counted; the
next cron tick runs again, because the cron loop only enqueues.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.ai.provider import AiProvider
from deckyard.ai.store import catalog_diff, model_list, model_sync
from deckyard.clock import Clock
from deckyard.db import Database
from deckyard.jobs import JobContext, JobError

log = logging.getLogger(__name__)


class CatalogJobs:
    """The handler of `ai.catalog_sync` and its failure count."""

    def __init__(self, db: Database, provider: AiProvider, clock: Clock) -> None:
        self.db = db
        self.provider = provider
        self.clock = clock
        self.failures = 0
        self.changes = 0

    async def sync(self, ctx: JobContext) -> dict[str, Any]:
        """Fetch the model list and store what changed."""
        try:
            fetched = await self.provider.models(remaining=ctx.remaining())
        except JobError as exc:
            self.failures += 1
            log.warning("model catalog sync failed (job %d): %s: %s", ctx.id, exc.code, exc)
            raise
        async with self.db.read_connection() as conn:
            stored = await model_list(conn)
        change = catalog_diff(stored, fetched)
        if change.changed:

            async def write(conn: AsyncConnection) -> None:
                await model_sync(conn, change, fetched, self.clock.now())

            ctx.on_success(write)
            self.changes += 1
        return {
            "models": len(fetched),
            "added": change.added,
            "removed": change.removed,
            "updated": change.updated,
            "written": change.changed,
        }
