"""The deck-wide job handlers: build the static site ZIP, and export the deck as one PDF.

Both store their output in the artefact store and name it in the job's result
(`artifact_key`, `content_type`, `size`, `sha256`), the same shape screenshot jobs use, so
`GET /v1/jobs/{id}/artifact` serves it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.build import build_site, verify_site_zip
from deckyard.decks.compile import compile_deck, compile_print_document
from deckyard.decks.errors import CompileError, SiteVerificationError
from deckyard.decks.limits import DeckLimits, site_zip_limits
from deckyard.decks.render_check import RenderGateway
from deckyard.decks.service_jobs import load_deck, refused, workspace_of
from deckyard.decks.service_model import (
    ZIP_MEDIA_TYPE,
    BrowserCheck,
    DeckEvent,
    DeckJobErrorCode,
)
from deckyard.jobs import JobContext, JobError
from deckyard.render.control.spec import ScreenshotSpec
from deckyard.storage import ArtifactStore


def _compile_failed(exc: CompileError) -> JobError:
    return JobError(
        DeckJobErrorCode.DECK_COMPILE_FAILED,
        "; ".join(p.describe() for p in exc.problems[:5]),
        retryable=False,
    )


class DeckJobs:
    """Handlers of `deck.build` and `deck.export`."""

    def __init__(
        self, db: Database, settings: Settings, store: ArtifactStore, gateway: RenderGateway
    ) -> None:
        self.db = db
        self.settings = settings
        self.store = store
        self.gateway = gateway
        self.limits = DeckLimits.from_settings(settings)

    async def build(self, ctx: JobContext) -> dict[str, Any]:
        """Compile every page, build the site ZIP, verify it by safe extraction, store it.

        Loading the site in a browser (`verify_site_in_browser`) is not done here yet; the
        result says so in `browser_check`.
        """
        workspace = workspace_of(ctx)
        deck_id = int(ctx.payload["deck_id"])
        row, source = await load_deck(self.db, deck_id, workspace)
        try:
            pages = compile_deck(source, self.limits)
        except CompileError as exc:
            raise _compile_failed(exc) from None
        data = build_site(row.title, pages, version=f"{deck_id}.{row.version}")
        try:
            check = verify_site_zip(data, site_zip_limits(self.settings))
        except SiteVerificationError as exc:
            raise refused(DeckJobErrorCode.SITE_INVALID, f"{exc.code}: {exc.message}") from None
        await ctx.emit(
            DeckEvent.SITE_VERIFIED,
            {"version": check.version, "page_count": check.page_count, "files": len(check.files)},
        )
        key = f"decks/{workspace}/{deck_id}/site-job-{ctx.id}.zip"
        await self.store.put(key, data)
        return {
            "deck_id": deck_id,
            "deck_version": row.version,
            "artifact_key": key,
            "content_type": ZIP_MEDIA_TYPE,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "site_version": check.version,
            "page_count": check.page_count,
            "browser_check": BrowserCheck.NOT_PERFORMED.value,
        }

    async def export(self, ctx: JobContext) -> dict[str, Any]:
        """Render the print document (one printed page per slide, at slide size) as a PDF."""
        workspace = workspace_of(ctx)
        deck_id = int(ctx.payload["deck_id"])
        row, source = await load_deck(self.db, deck_id, workspace)
        try:
            document = compile_print_document(source, self.limits)
        except CompileError as exc:
            raise _compile_failed(exc) from None
        spec = ScreenshotSpec.model_validate(
            {
                "html": document,
                "width": source.width,
                "height": source.height,
                "format": "pdf",
                "media": "print",
            }
        )
        outcome = await self.gateway.run(
            spec,
            workspace_id=workspace,
            parent_id=ctx.id,
            timeout=self.settings.deck_job_timeout_seconds,
        )
        if outcome.error_code is not None:
            raise refused(outcome.error_code, outcome.message or outcome.error_code)
        if outcome.job is not None:
            await ctx.emit(DeckEvent.RENDER_JOB, {"job_id": outcome.job.id})
        result = outcome.result
        return {
            "deck_id": deck_id,
            "deck_version": row.version,
            "page_count": len(source.pages),
            "artifact_key": result["artifact_key"],
            "content_type": result["content_type"],
            "size": result["size"],
            "sha256": result["sha256"],
        }
