"""The deck-wide job handlers: build the static site ZIP, and export the deck in a format of
`deckyard.outputs` (`DeckOutputs`: the PDF, the PPTX).

Both store their output in the artefact store and name it in the job's result
(`artifact_key`, `content_type`, `size`, `sha256`), the same shape render requests use, so
`GET /v1/jobs/{id}/artifact` serves it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from typing import Any

from deckyard.artifacts import ArtifactStore
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.compile.documents import CompiledPage, compile_deck
from deckyard.decks.errors import CompileError, SiteVerificationError
from deckyard.decks.jobs.deck_outputs import DeckOutputs
from deckyard.decks.jobs.handler_support import load_deck, refused, workspace_of
from deckyard.decks.jobs.names import (
    ZIP_MEDIA_TYPE,
    BrowserCheck,
    DeckEvent,
    DeckJobErrorCode,
)
from deckyard.decks.site.build import INDEX as SITE_INDEX
from deckyard.decks.site.build import MANIFEST as SITE_MANIFEST
from deckyard.decks.site.build import build_site
from deckyard.decks.site.verify import verify_site_zip
from deckyard.decks.source.limits import DeckLimits, site_zip_limits
from deckyard.decks.validation.render_check import RenderGateway
from deckyard.jobs import JobContext, JobError
from deckyard.render.control.models import ScreenshotSpec


def _compile_failed(exc: CompileError) -> JobError:
    return JobError(
        DeckJobErrorCode.DECK_COMPILE_FAILED,
        "; ".join(p.describe() for p in exc.problems[:5]),
        retryable=False,
    )


class DeckJobs:
    """Handlers of `deck.build` and `deck.export`."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        store: ArtifactStore,
        gateway: RenderGateway,
        outputs: DeckOutputs,
    ) -> None:
        self.db = db
        self.settings = settings
        self.store = store
        self.gateway = gateway
        self.outputs = outputs
        self.limits = DeckLimits.from_settings(settings)

    async def build(self, ctx: JobContext) -> dict[str, Any]:
        """Compile every page, build the site ZIP, verify it, store it.

        Verification is a safe extraction that checks the manifest's sizes and hashes, then
        loading `index.html` in Chromium with the rest of the site as its only reachable files:
        any failed or blocked request, page error or broken image fails the build.
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
        browser = await self.verify_site_in_browser(ctx, data, pages[0], workspace)
        await ctx.emit(DeckEvent.SITE_LOADED, browser)
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
            "browser_check": BrowserCheck.PASSED.value,
            "browser": browser,
        }

    async def verify_site_in_browser(
        self, ctx: JobContext, site: bytes, first: CompiledPage, workspace: str
    ) -> dict[str, Any]:
        """Load the built site's index in Chromium; refuse the build unless nothing failed.

        The index shows the first page; the other pages are not loaded at start, so they stay
        out of the render (each page of a reveal.js deck holds the whole deck, and forty of
        them passed the renderer's document limit).
        """
        with zipfile.ZipFile(io.BytesIO(site)) as archive:
            pages = [str(p["file"]) for p in json.loads(archive.read(SITE_MANIFEST))["pages"]]
            unused = set(pages[1:])
            files = {
                info.filename: base64.b64encode(archive.read(info)).decode("ascii")
                for info in archive.infolist()
                if not info.is_dir() and info.filename not in unused
            }
        index = base64.b64decode(files.pop(SITE_INDEX)).decode("utf-8")
        spec = ScreenshotSpec.model_validate(
            {
                "html": index,
                "files": files,
                "width": first.width,
                "height": first.height,
                "wait": {"until": "load", "delay_ms": 300},
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
        diagnostics = (outcome.result or {}).get("diagnostics") or {}
        problems = {
            name: diagnostics.get(name) or []
            for name in ("failed_requests", "blocked_requests", "page_errors", "broken_images")
        }
        found = {name: items for name, items in problems.items() if items}
        if found:
            raise refused(
                DeckJobErrorCode.SITE_INVALID,
                f"the built site did not load cleanly in Chromium: {json.dumps(found)[:1500]}",
            )
        return {
            "failed_requests": 0,
            "files_served": len(files),
            "render_id": outcome.request_id,
        }

    async def export(self, ctx: JobContext) -> dict[str, Any]:
        """`deck.export`: the payload's format of `deckyard.outputs` (`DeckOutputs`)."""
        return await self.outputs.export(ctx)
