"""`deck.export` for the output formats of `deckyard.outputs` (`format` in the payload).

The PDF stays with `DeckJobs.export` (the print document). A format that needs page layouts
(PPTX) gets every page's current version rendered in one deck render request with `layout`
on: each page's PNG and its layout come from the same browser visit, so the shapes line up
with the picture. The format then builds in this process (never in the renderer), and the
file goes to the artefact store under the job, named in the result like the PDF's, with the
format's per-page report (`pages`: `page`, `mode`, `why`). With `steps` in the payload the deck
is first expanded into a page per step (`compile.steps.step_deck`, as the PDF does) and those
pages are compiled and rendered instead of the stored versions.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from bs4 import BeautifulSoup

from deckyard.artifacts import ArtifactStore
from deckyard.db import Database
from deckyard.decks.compile.documents import compile_deck
from deckyard.decks.compile.steps import step_deck
from deckyard.decks.errors import CompileError
from deckyard.decks.jobs.handler_support import load_deck, refused, workspace_of
from deckyard.decks.jobs.names import DeckJobErrorCode
from deckyard.decks.jobs.page_jobs import slide_spec_for
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.store import DeckRow
from deckyard.decks.validation.deck_check import render_specs
from deckyard.decks.validation.page_check import PageValidator
from deckyard.jobs import JobContext, JobError
from deckyard.outputs import DeckInput, Needs, OutputFormat, PageInput

_NOTES = re.compile(r"<aside\b[^>]*\bclass=\"dy-notes\"[^>]*>.*?</aside>", re.S)


def page_notes(document: str) -> str:
    """The speaker notes of a compiled page (its hidden `.dy-notes`), one paragraph a line."""
    found = _NOTES.search(document)
    if found is None:
        return ""
    soup = BeautifulSoup(found.group(0), "html.parser")
    lines = [p.get_text(" ", strip=True) for p in soup.find_all("p")]
    return "\n".join(line for line in lines if line) or soup.get_text(" ", strip=True)


class DeckOutputs:
    """Builds a registered output format from the deck's rendered pages."""

    def __init__(
        self, db: Database, store: ArtifactStore, validator: PageValidator, limits: DeckLimits
    ) -> None:
        self.db = db
        self.store = store
        self.validator = validator
        self.limits = limits

    async def export(self, ctx: JobContext, output: OutputFormat) -> dict[str, Any]:
        """Render every page with its layout, build `output`, store it; see the module doc."""
        workspace = workspace_of(ctx)
        deck_id = int(ctx.payload["deck_id"])
        row, source = await load_deck(self.db, deck_id, workspace)
        if output.needs is not Needs.PAGE_LAYOUTS:
            raise refused(DeckJobErrorCode.UNKNOWN_FORMAT, f"cannot build {output.name} here")
        slide = row.manifest.get("slide") or {}
        documents = self._documents(row, source, steps=bool(ctx.payload.get("steps")))
        specs = [
            # the pages were audited when validated: the export's render only draws and measures
            slide_spec_for(html, slide, {}).model_copy(update={"layout": True, "audit": False})
            for _, html in documents
        ]
        outcomes = await render_specs(self.validator, ctx, specs)
        pages: list[PageInput] = []
        for (name, html), outcome in zip(documents, outcomes, strict=True):
            if outcome.error_code is not None or not outcome.result:
                code = outcome.error_code or "RENDER_RESULT_LOST"
                raise refused(code, f"{name}: {outcome.message or code}")
            png = await self.store.get(outcome.result["artifact_key"])
            if png is None:
                raise JobError(
                    DeckJobErrorCode.ARTIFACT_MISSING,
                    f"{name}: the render's PNG is gone from the store",
                    retryable=True,
                )
            layout = (outcome.result.get("diagnostics") or {}).get("layout")
            pages.append(PageInput(name, png, layout, page_notes(html)))
        manifest = source.manifest
        deck = DeckInput(
            manifest.title, manifest.author, manifest.lang, source.width, source.height, pages
        )
        made = await output.make(deck)
        key = f"decks/{workspace}/{deck_id}/export-job-{ctx.id}.{output.name}"
        await self.store.put(key, made.data)
        return {
            "deck_id": deck_id,
            "deck_version": row.version,
            "format": output.name,
            "page_count": len(pages),
            "artifact_key": key,
            "content_type": output.media_type,
            "size": len(made.data),
            "sha256": hashlib.sha256(made.data).hexdigest(),
            "pages": made.pages,
            "warnings": made.warnings,
        }

    def _documents(self, row: DeckRow, source: DeckSource, *, steps: bool) -> list[tuple[str, str]]:
        """(page name, compiled document) of every page: the stored versions, or with `steps`
        the deck's pages expanded into a page per step and compiled here."""
        if not steps:
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
            compiled = compile_deck(step_deck(source, self.limits), self.limits)
        except CompileError as exc:
            problems = "; ".join(p.describe() for p in exc.problems[:5])
            raise refused(DeckJobErrorCode.DECK_COMPILE_FAILED, problems) from None
        return [(page.name, page.document) for page in compiled]
