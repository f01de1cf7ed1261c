"""`AiService`: registers the AI job kinds on the runtime and enqueues them for the API.

With no provider configured (`DECKYARD_AI_BASE_URL` unset) it registers nothing, adds no
worker or cron entry, and `configured` is False: the AI routes answer 503 `AI_NOT_CONFIGURED`
and nothing else changes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.ai.catalog import CatalogJobs
from deckyard.ai.errors import AI_QUEUE, AiJobKind
from deckyard.ai.images import ImageJobs
from deckyard.ai.outline import OutlineJobs
from deckyard.ai.page_edits import PageEditJobs
from deckyard.ai.provider import AiProvider
from deckyard.ai.store import StoredModel, model_list
from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.service import DeckService
from deckyard.decks.source.deck_source import (
    DeckManifest,
    DeckSource,
    PageKind,
    PageSource,
    SlideSize,
)
from deckyard.jobs import Job, Runtime


class AiService:
    """AI authoring's entry point: page edits, images and the catalog."""

    def __init__(
        self,
        db: Database,
        runtime: Runtime,
        decks: DeckService,
        settings: Settings,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.decks = decks
        self.settings = settings
        self.provider: AiProvider | None = None
        self.catalog: CatalogJobs | None = None
        if not settings.ai_configured:
            return
        self.provider = provider = AiProvider(settings)
        self.pages = PageEditJobs(db, settings, provider, decks.page_jobs)
        self.images = ImageJobs(db, settings, provider, clock)
        self.outlines = OutlineJobs(runtime)
        self.catalog = CatalogJobs(db, provider, clock)
        handlers = {
            AiJobKind.PAGE_EDIT: self.pages.edit,
            AiJobKind.PAGE_CREATE: self.pages.create,
            AiJobKind.IMAGE: self.images.generate,
        }
        for kind, fn in handlers.items():
            runtime.handler(
                kind.value,
                queue=AI_QUEUE,
                max_attempts=settings.ai_job_max_attempts,
                timeout=settings.ai_job_timeout_seconds,
            )(fn)
        # No timeout of its own: it only waits for its slides, each bounded by theirs.
        runtime.handler(
            AiJobKind.DECK_OUTLINE.value,
            queue=AI_QUEUE,
            max_attempts=settings.ai_job_max_attempts,
        )(self.outlines.write)
        runtime.handler(
            AiJobKind.CATALOG_SYNC.value,
            queue=AI_QUEUE,
            max_attempts=1,
            timeout=settings.ai_request_timeout_seconds,
        )(self.catalog.sync)
        if settings.ai_catalog_cron:
            runtime.periodic(settings.ai_catalog_cron, AiJobKind.CATALOG_SYNC.value)

    @property
    def configured(self) -> bool:
        """True when a provider is configured and the AI job kinds are registered."""
        return self.provider is not None

    async def close(self) -> None:
        """Close the provider's connections."""
        if self.provider is not None:
            await self.provider.close()

    async def _enqueue(self, kind: AiJobKind, payload: dict[str, Any], workspace_id: str) -> Job:
        return await self.runtime.enqueue(
            kind.value, payload, queue=AI_QUEUE, workspace_id=workspace_id
        )

    async def edit_page(
        self,
        workspace_id: str,
        deck_id: int,
        page: str,
        instruction: str,
        *,
        skip_visual_verification: bool = False,
    ) -> Job:
        """Enqueue `ai.page_edit`."""
        payload = {
            "deck_id": deck_id,
            "page": page,
            "instruction": instruction,
            "skip_visual_verification": skip_visual_verification,
        }
        return await self._enqueue(AiJobKind.PAGE_EDIT, payload, workspace_id)

    async def create_page(
        self,
        workspace_id: str,
        deck_id: int,
        page: str,
        prompt: str,
        *,
        kind: str,
        skip_visual_verification: bool = False,
    ) -> Job:
        """Enqueue `ai.page_create`."""
        payload = {
            "deck_id": deck_id,
            "page": page,
            "prompt": prompt,
            "kind": kind,
            "skip_visual_verification": skip_visual_verification,
        }
        return await self._enqueue(AiJobKind.PAGE_CREATE, payload, workspace_id)

    async def deck_from_outline(
        self,
        workspace_id: str,
        title: str,
        items: list[str],
        *,
        kind: str,
        width: int,
        height: int,
        skip_visual_verification: bool = False,
    ) -> tuple[int, Job]:
        """Create a deck with a title slide and enqueue the `ai.deck_outline` job that has the
        model write one slide per item; answers the deck id and that job.

        The job's status is the whole outline's: succeeded once every slide was written,
        failed as soon as one could not be (see `deckyard.ai.outline`).
        """
        manifest = DeckManifest(title=title, slide=SlideSize(width=width, height=height))
        cover = PageSource(name="01-title", kind=PageKind.MARKDOWN, text=f"# {title}\n")
        made = await self.decks.create_deck(
            workspace_id, DeckSource(manifest=manifest, pages=[cover])
        )
        payload = {
            "deck_id": made.deck_id,
            "title": title,
            "items": items,
            "kind": kind,
            "skip_visual_verification": skip_visual_verification,
        }
        return made.deck_id, await self._enqueue(AiJobKind.DECK_OUTLINE, payload, workspace_id)

    async def generate_image(self, workspace_id: str, deck_id: int, prompt: str, size: str) -> Job:
        """Enqueue `ai.image`."""
        payload = {"deck_id": deck_id, "prompt": prompt, "size": size}
        return await self._enqueue(AiJobKind.IMAGE, payload, workspace_id)

    async def sync_catalog(self, conn: AsyncConnection | None = None) -> Job:
        """Enqueue a catalog sync now (the cron does it on its schedule)."""
        return await self.runtime.enqueue(
            AiJobKind.CATALOG_SYNC.value, {}, queue=AI_QUEUE, conn=conn
        )

    async def models(self) -> list[StoredModel]:
        """The stored model catalog."""
        async with self.db.read_connection() as conn:
            return await model_list(conn)
