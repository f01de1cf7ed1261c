"""`deck.export`: every output format of `deckyard.outputs` (`format` in the payload, `pdf`
by default), rendered as the format's `needs` say, built, checked as its `verify` says, stored.

* `Needs.PRINTED` (PDF): the deck's print document, a printed page per slide, printed by
  Chromium in one render (`tagged` in the payload: Chromium's tagged PDF; `print_document`:
  the store key of that document, compiled by the enqueuer, so not compiled here).
* `Needs.PAGE_LAYOUTS` (PPTX): every page's current version rendered in one deck render
  request with `layout` on: each page's PNG and its layout come from the same browser visit,
  so the shapes line up with the picture.
* `Needs.COMPILED` (the site ZIP): every page compiled, no render (with `"compiled": "stored"`
  in the payload, the versions' stored compiles: the deck is not compiled again);
  `Verify.SITE` then checks the ZIP as a site (`site_check`) before it is stored.
* `Needs.PAGE_IMAGES` (PNG, JPEG, WebP): every page's picture at the format's settings
  (`DeckPageJobs.pictures`, as `deck.screenshots` makes them): a version whose pointer already
  has it (a PNG's validation render) is not rendered again, the others are, in one deck render;
  a version whose validation failed is left out. With `steps`, the step pages are rendered.

With `steps` in the payload the deck is first expanded into a page per step
(`compile.steps.step_deck`) and those pages are compiled and rendered instead of the stored
versions; a format that plays steps itself (`stepped` false: the site) refuses it. Renders made
here are not audited (a spec's default): the pages were when validated. The format then builds
in this process (never in the renderer), and the file goes to the artefact store under the
job, named in the result (`artifact_key`, `content_type`, `size`, `sha256`, as render requests
name theirs, so `GET /v1/jobs/{id}/artifact` serves it) with the format's per-page report
(`pages`), its warnings (each also an `output_warning` event) and its facts.

`deck.build`, the site ZIP's job kind before the site became a format, is `deck.export` of
`zip` (`build`): jobs queued by an older version still finish.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath
from typing import Any

from bs4 import BeautifulSoup

from deckyard.artifacts import ArtifactStore
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.compile.documents import compile_deck, compile_print_document
from deckyard.decks.compile.steps import step_deck
from deckyard.decks.errors import CompileError
from deckyard.decks.jobs.deck_pages import STORED, DeckPageJobs, stored_compiles
from deckyard.decks.jobs.handler_support import load_deck, refused, rendered, workspace_of
from deckyard.decks.jobs.names import PDF_FORMAT, DeckEvent, DeckJobErrorCode
from deckyard.decks.jobs.page_jobs import slide_spec_for
from deckyard.decks.jobs.site_check import check_site
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.store import DeckRow
from deckyard.decks.validation.deck_check import render_specs
from deckyard.decks.validation.page_check import PageValidator
from deckyard.jobs import JobContext, JobError
from deckyard.outputs import (
    OUTPUTS,
    CompiledInput,
    DeckInput,
    Needs,
    OutputFormat,
    PageImage,
    PageInput,
    Printed,
    Verify,
)
from deckyard.outputs.images import PNG
from deckyard.outputs.site import SITE
from deckyard.render.control.models import ScreenshotSpec

_NOTES = re.compile(r"<aside\b[^>]*\bclass=\"dy-notes\"[^>]*>.*?</aside>", re.S)


def page_notes(document: str) -> str:
    """The speaker notes of a compiled page (its hidden `.dy-notes`), one paragraph a line."""
    found = _NOTES.search(document)
    if found is None:
        return ""
    soup = BeautifulSoup(found.group(0), "html.parser")
    lines = [p.get_text(" ", strip=True) for p in soup.find_all("p")]
    return "\n".join(line for line in lines if line) or soup.get_text(" ", strip=True)


def _compile_failed(exc: CompileError) -> JobError:
    problems = "; ".join(p.describe() for p in exc.problems[:5])
    return refused(DeckJobErrorCode.DECK_COMPILE_FAILED, problems)


class DeckOutputs:
    """The `deck.export` handler (and `deck.build`'s): renders what a format needs, builds
    it, checks it, stores it."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        store: ArtifactStore,
        validator: PageValidator,
        limits: DeckLimits,
    ) -> None:
        self.db = db
        self.settings = settings
        self.store = store
        self.validator = validator
        self.limits = limits
        self.pictures = DeckPageJobs(db, store, validator)

    async def export(self, ctx: JobContext) -> dict[str, Any]:
        """Make the payload's `format` of the deck; see the module doc."""
        return await self._make(ctx, str(ctx.payload.get("format") or PDF_FORMAT))

    async def build(self, ctx: JobContext) -> dict[str, Any]:
        """`deck.build` (an older version's jobs): the site ZIP, as `deck.export` makes it."""
        return await self._make(ctx, SITE.name)

    async def _make(self, ctx: JobContext, fmt: str) -> dict[str, Any]:
        output = OUTPUTS.get(fmt)
        if output is None:
            raise refused(DeckJobErrorCode.UNKNOWN_FORMAT, f"no export format {fmt!r}")
        workspace = workspace_of(ctx)
        deck_id = int(ctx.payload["deck_id"])
        row, source = await load_deck(self.db, deck_id, workspace)
        stepped = bool(ctx.payload.get("steps"))
        if stepped and not output.stepped:
            raise refused(
                DeckJobErrorCode.OPTION_UNSUPPORTED, f"steps do not apply to {output.name}"
            )
        if stepped:
            source = step_deck(source, self.limits)
        manifest = source.manifest
        facts = (manifest.title, manifest.author, manifest.lang, source.width, source.height)
        version = f"{deck_id}.{row.version}"
        if output.needs is Needs.PRINTED:
            printed = await self._printed(ctx, source, workspace)
            deck = DeckInput(
                *facts,
                len(source.pages),
                printed=printed,
                version=version,
                budget_bytes_per_slide=self.settings.deck_pdf_warn_bytes_per_slide,
            )
        elif output.needs is Needs.COMPILED:
            compiled = self._compiled(row, source, stored=ctx.payload.get("compiled") == STORED)
            deck = DeckInput(*facts, len(compiled), compiled=compiled, version=version)
        elif output.needs is Needs.PAGE_IMAGES:
            images = await self._images(ctx, row, source, output, stepped=stepped)
            deck = DeckInput(*facts, len(images), images=images, version=version)
        else:
            pages = await self._pages(ctx, row, source, stepped=stepped)
            deck = DeckInput(*facts, len(pages), pages=pages, version=version)
        made = await output.make(deck)
        checked: dict[str, Any] = {}
        if output.verify is Verify.SITE:
            size = (source.width, source.height)
            gateway = self.validator.gateway
            checked = await check_site(ctx, gateway, self.settings, made.data, size, workspace)
        suffix = PurePosixPath(output.file_name).suffix or f".{output.name}"
        key = f"decks/{workspace}/{deck_id}/export-job-{ctx.id}{suffix}"
        await self.store.put(key, made.data)
        for warning in made.warnings:
            await ctx.emit(DeckEvent.OUTPUT_WARNING, {"format": output.name, "message": warning})
        result = {
            "deck_id": deck_id,
            "deck_version": row.version,
            "format": output.name,
            "page_count": deck.slides,
            "artifact_key": key,
            "content_type": output.media_type,
            "size": len(made.data),
            "sha256": hashlib.sha256(made.data).hexdigest(),
            "pages": made.pages,
            "warnings": made.warnings,
            **made.facts,
            **checked,
        }
        if output.needs is Needs.PRINTED:
            result["tagged"] = bool(ctx.payload.get("tagged"))
        return result

    async def _printed(self, ctx: JobContext, source: DeckSource, workspace: str) -> Printed:
        """The print document (a printed page per slide, at slide size) and Chromium's PDF."""
        document = await self._stored_print(ctx)
        if document is None:
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
                "pdf_tagged": bool(ctx.payload.get("tagged")),
            }
        )
        outcome = await self.validator.gateway.run(
            spec,
            workspace_id=workspace,
            parent_id=ctx.id,
            timeout=self.settings.deck_job_timeout_seconds,
        )
        if outcome.error_code is not None:
            raise refused(outcome.error_code, outcome.message or outcome.error_code)
        await ctx.emit(DeckEvent.RENDER, {"render_id": outcome.request_id})
        key = outcome.result["artifact_key"]
        return Printed(document, await self._rendered(key, f"the render's PDF {key}"))

    async def _pages(
        self, ctx: JobContext, row: DeckRow, source: DeckSource, *, stepped: bool
    ) -> list[PageInput]:
        """Every page rendered with its layout: its PNG, layout and speaker notes."""
        slide = row.manifest.get("slide") or {}
        documents = self._documents(row, source, stepped=stepped)
        specs = [
            # unaudited (a spec's default): the pages were audited when validated
            slide_spec_for(html, slide, {}).model_copy(update={"layout": True})
            for _, html in documents
        ]
        outcomes = await render_specs(self.validator, ctx, specs)
        pages: list[PageInput] = []
        for (name, html), outcome in zip(documents, outcomes, strict=True):
            result = rendered(name, outcome)
            png = await self._rendered(result["artifact_key"], f"{name}: the render's PNG")
            layout = (result.get("diagnostics") or {}).get("layout")
            pages.append(PageInput(name, png, layout, page_notes(html)))
        return pages

    async def _images(
        self,
        ctx: JobContext,
        row: DeckRow,
        source: DeckSource,
        output: OutputFormat,
        *,
        stepped: bool,
    ) -> list[PageImage]:
        """Every page's picture at `output.picture`; with `stepped`, every step page's,
        rendered here."""
        config = dict(output.picture or {})
        if stepped:
            slide = row.manifest.get("slide") or {}
            documents = self._documents(row, source, stepped=True)
            specs = [slide_spec_for(html, slide, config) for _, html in documents]
            outcomes = await render_specs(self.validator, ctx, specs)
            images: list[PageImage] = []
            for index, ((name, _html), outcome) in enumerate(zip(documents, outcomes, strict=True)):
                key = rendered(name, outcome)["artifact_key"]
                data = await self._rendered(key, f"{name}: picture")
                images.append(PageImage(name, index, data))
            return images
        # a version keeps one picture: the PNG at the validation's settings
        keep = output is PNG
        pictures = await self.pictures.pictures(ctx, row, config, row.pages, keep=keep)
        images = []
        for index, version in enumerate(row.pages):
            key = pictures.pointers[version.page_name]["artifact_key"]
            data = await self._rendered(key, f"{version.page_name}: picture")
            images.append(PageImage(version.page_name, index, data))
        return images

    def _compiled(self, row: DeckRow, source: DeckSource, *, stored: bool) -> list[CompiledInput]:
        """Every page compiled: the versions' stored compiles (`stored_compiles`) when the
        payload says they are current (`deckyard render`, of the deck it has just stored) and
        every page has one, else the deck compiled."""
        kept = stored_compiles(row, source) if stored else None
        if kept is not None:
            return list(kept.values())
        try:
            return list(compile_deck(source, self.limits))
        except CompileError as exc:
            raise _compile_failed(exc) from None

    async def _stored_print(self, ctx: JobContext) -> str | None:
        """The print document the enqueuer compiled and stored (`print_document` in the
        payload: `deckyard render` compiles it beside the pages), None without one."""
        key = ctx.payload.get("print_document")
        data = (
            await self.store.get(key)
            if isinstance(key, str) and not ctx.payload.get("steps")
            else None
        )
        return data.decode("utf-8") if data is not None else None

    async def _rendered(self, key: str, what: str) -> bytes:
        """The stored output of a render; a retryable failure when it is gone (swept)."""
        data = await self.store.get(key)
        if data is None:
            raise JobError(
                DeckJobErrorCode.ARTIFACT_MISSING, f"{what} is gone from the store", retryable=True
            )
        return data

    def _documents(
        self, row: DeckRow, source: DeckSource, *, stepped: bool
    ) -> list[tuple[str, str]]:
        """(page name, compiled document) of every page: the stored versions, or, for a
        `stepped` source (a page per step), its pages compiled here."""
        if not stepped:
            documents = []
            for version in row.pages:
                if version.compiled is None:
                    raise refused(
                        DeckJobErrorCode.NOT_COMPILED,
                        f"page {version.page_name} version {version.number} did not compile",
                    )
                documents.append((version.page_name, version.compiled))
            return documents
        try:
            compiled = compile_deck(source, self.limits)
        except CompileError as exc:
            raise _compile_failed(exc) from None
        return [(page.name, page.document) for page in compiled]
