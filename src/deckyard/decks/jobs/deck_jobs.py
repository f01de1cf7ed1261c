"""The deck-wide job handlers: build the static site ZIP, and export the deck as one PDF (or,
through `DeckOutputs`, another format of `deckyard.outputs`).

Both store their output in the artefact store and name it in the job's result
(`artifact_key`, `content_type`, `size`, `sha256`), the same shape screenshot jobs use, so
`GET /v1/jobs/{id}/artifact` serves it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import zipfile
from typing import Any

from deckyard.artifacts import ArtifactStore
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.compile.documents import CompiledPage, compile_deck, compile_print_document
from deckyard.decks.compile.steps import step_deck
from deckyard.decks.errors import CompileError, SiteVerificationError
from deckyard.decks.jobs.deck_outputs import DeckOutputs
from deckyard.decks.jobs.handler_support import load_deck, refused, workspace_of
from deckyard.decks.jobs.names import (
    PDF_FORMAT,
    ZIP_MEDIA_TYPE,
    BrowserCheck,
    DeckEvent,
    DeckJobErrorCode,
)
from deckyard.decks.pdf_navigation import deck_outline, navigable_pdf, size_warning
from deckyard.decks.site.build import INDEX as SITE_INDEX
from deckyard.decks.site.build import MANIFEST as SITE_MANIFEST
from deckyard.decks.site.build import build_site
from deckyard.decks.site.verify import verify_site_zip
from deckyard.decks.source.limits import DeckLimits, site_zip_limits
from deckyard.decks.validation.render_check import RenderGateway
from deckyard.jobs import JobContext, JobError
from deckyard.outputs import OUTPUTS
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
                "audit": False,  # a load check of the built site, not a check of its content
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
            "render_job": outcome.job.id if outcome.job else None,
        }

    async def export(self, ctx: JobContext) -> dict[str, Any]:
        """Render the print document (one printed page per slide, at slide size) as a PDF,
        then make it navigable (`pdf_navigation`: outline, slide links, metadata).

        `tagged` in the payload asks Chromium for a tagged PDF. A PDF over its size budget
        (`deck_pdf_warn_bytes_per_slide`) is kept, with a warning in the result. Another
        `format` in the payload is one of `deckyard.outputs` (`DeckOutputs`).
        """
        fmt = str(ctx.payload.get("format") or PDF_FORMAT)
        if fmt != PDF_FORMAT:
            output = OUTPUTS.get(fmt)
            if output is None:
                raise refused(DeckJobErrorCode.UNKNOWN_FORMAT, f"no export format {fmt!r}")
            return await self.outputs.export(ctx, output)
        workspace = workspace_of(ctx)
        deck_id = int(ctx.payload["deck_id"])
        tagged = bool(ctx.payload.get("tagged"))
        row, source = await load_deck(self.db, deck_id, workspace)
        if ctx.payload.get("steps"):
            source = step_deck(source, self.limits)
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
                "pdf_tagged": tagged,
                "audit": False,  # each slide was audited as its page; the print adds nothing
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
        printed = await self.store.get(result["artifact_key"])
        if printed is None:
            raise JobError(
                DeckJobErrorCode.ARTIFACT_MISSING,
                f"the render's PDF {result['artifact_key']} is gone from the store",
                retryable=True,
            )
        manifest = source.manifest
        facts = deck_outline(document, manifest.title, manifest.author, manifest.lang)
        data = await asyncio.to_thread(navigable_pdf, printed, facts)
        key = f"decks/{workspace}/{deck_id}/export-job-{ctx.id}.pdf"
        await self.store.put(key, data)
        warnings = []
        warning = size_warning(
            len(data), len(source.pages), self.settings.deck_pdf_warn_bytes_per_slide
        )
        if warning is not None:
            warnings.append(warning)
            await ctx.emit(DeckEvent.PDF_SIZE_WARNING, {"size": len(data), "message": warning})
        return {
            "deck_id": deck_id,
            "deck_version": row.version,
            "page_count": len(source.pages),
            "artifact_key": key,
            "content_type": result["content_type"],
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "tagged": tagged,
            "outline": facts.slide_titles,
            "warnings": warnings,
        }
