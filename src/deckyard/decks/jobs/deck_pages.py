"""Deck-wide page jobs: validate every page, and screenshot every page, in one deck render.

`deck.validate` checks every page's current version (compile, then one deck render request for
all of them) and reports each page's result as a `validation` event, the same result
`page.validate` reports for that page. With `"compiled": "stored"` in its payload (the
enqueuer's word that the versions' stored compiles are current, as `deckyard render` knows of
the deck it has just stored) those are rendered, and the deck is not compiled again
(`stored_compiles`). A page that passed gets its validation, and the
validation render as its screenshot, recorded on its version; the job fails with the first
failing page's code when any page did not pass (the passed pages are recorded all the same).

`deck.screenshots` gives every current version a screenshot at `config`: a version whose
pointer already renders that spec keeps it (render once), the others are rendered in one deck
request and their pointers set at the job's finish.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.artifacts import ArtifactStore
from deckyard.db import Database
from deckyard.decks.compile.documents import CompiledPage
from deckyard.decks.jobs.handler_support import load_deck, refused, rendered, workspace_of
from deckyard.decks.jobs.names import DeckEvent, DeckJobErrorCode
from deckyard.decks.jobs.page_jobs import slide_spec_for
from deckyard.decks.jobs.screenshots import (
    reusable_pointer,
    screenshot_pointer,
    validation_pointer,
)
from deckyard.decks.source.deck_source import DeckSource, PageKind
from deckyard.decks.store import (
    DeckRow,
    PageVersionRow,
    page_version_set_screenshot,
    page_version_set_validation,
)
from deckyard.decks.validation.deck_check import check_pages, render_specs
from deckyard.decks.validation.page_check import PageCheck, PageValidator
from deckyard.decks.validation.rules import is_validation_passed
from deckyard.jobs import JobContext, JobError


@dataclass(frozen=True)
class Pictures:
    """The pictures `DeckPageJobs.pictures` found or made: each page's pointer, by name, and
    how many were rendered and how many reused."""

    pointers: dict[str, dict[str, Any]]
    rendered: int
    reused: int


STORED = "stored"
"""`"compiled": "stored"` in a deck job's payload: its pages' stored compiles are current."""

Write = Callable[[AsyncConnection], Awaitable[None]]


def stored_compiles(row: DeckRow, source: DeckSource) -> dict[str, CompiledPage] | None:
    """Every current version's stored compile, as the compiler made it; None when a page has
    none (it did not compile: the deck is compiled again, for that page's problems)."""
    compiled: dict[str, CompiledPage] = {}
    for index, version in enumerate(row.pages):
        if version.compiled is None or version.compiled_sha256 is None:
            return None
        compiled[version.page_name] = CompiledPage(
            version.page_name,
            index,
            PageKind(version.kind),
            version.compiled,
            version.compiled_sha256,
            source.width,
            source.height,
        )
    return compiled


class DeckPageJobs:
    """Handlers of `deck.validate` and `deck.screenshots`."""

    def __init__(self, db: Database, store: ArtifactStore, validator: PageValidator) -> None:
        self.db = db
        self.store = store
        self.validator = validator

    async def validate(self, ctx: JobContext) -> dict[str, Any]:
        """Validate every page's current version in one deck render; see the module docstring."""
        workspace = workspace_of(ctx)
        row, source = await load_deck(self.db, int(ctx.payload["deck_id"]), workspace)
        versions = {p.page_name: p for p in row.pages}
        stored = stored_compiles(row, source) if ctx.payload.get("compiled") == STORED else None
        checks = await check_pages(self.validator, source, ctx, stored)
        records: list[tuple[PageVersionRow, dict[str, Any], dict[str, Any] | None]] = []
        failed: PageCheck | None = None
        pages: dict[str, Any] = {}
        for check in checks:
            data = check.result.model_dump(mode="json")
            timings = ((check.render or {}).get("diagnostics") or {}).get("timings") or {}
            event = {"page": check.name, **data}
            if (check.render or {}).get("cached"):
                event["cached"] = True  # an earlier run's render: its time is not this run's
            elif "total_ms" in timings:
                event["render_ms"] = timings["total_ms"]
            await ctx.emit(DeckEvent.VALIDATION, event)
            version = versions.get(check.name)
            pages[check.name] = {"version_id": version.id if version else None, **data}
            if not is_validation_passed(check.result):
                failed = failed or check
                continue
            if version is not None:
                pointer = validation_pointer(check, version, job_id=ctx.id)
                records.append((version, data, pointer))

        async def record(conn: AsyncConnection) -> None:
            for version, data, pointer in records:
                await page_version_set_validation(conn, version.id, data)
                if pointer is not None:
                    await page_version_set_screenshot(conn, version.id, pointer)

        if failed is not None:
            await self.db.write(record)
            result = failed.result
            raise refused(
                result.error_code or "VALIDATION_FAILED", f"{failed.name}: {result.summary}"
            )
        ctx.on_success(record)
        return {"deck_id": row.id, "deck_version": row.version, "pages": pages}

    async def screenshots(self, ctx: JobContext) -> dict[str, Any]:
        """Screenshot every current version at `config`; see the module docstring."""
        workspace = workspace_of(ctx)
        row, _source = await load_deck(self.db, int(ctx.payload["deck_id"]), workspace)
        config: dict[str, Any] = dict(ctx.payload.get("config") or {})
        pictures = await self.pictures(ctx, row, config, row.pages)
        return {
            "deck_id": row.id,
            "rendered": pictures.rendered,
            "reused": pictures.reused,
            "pages": pictures.pointers,
        }

    async def pictures(
        self,
        ctx: JobContext,
        row: DeckRow,
        config: dict[str, Any],
        versions: list[PageVersionRow],
        *,
        keep: bool = True,
    ) -> Pictures:
        """A picture of each of `versions` at `config`: a version whose pointer already renders
        that spec keeps it, the others are rendered in one deck request and, with `keep`,
        become their versions' pointers when the job succeeds (a version has one). Refuses a
        version that did not compile, and the first render that failed."""
        slide = row.manifest.get("slide") or {}
        pointers: dict[int, dict[str, Any]] = {}
        todo: list[tuple[PageVersionRow, Any]] = []
        for version in versions:
            if version.compiled is None:
                raise JobError(
                    DeckJobErrorCode.NOT_COMPILED,
                    f"page {version.page_name} version {version.number} did not compile",
                    retryable=False,
                )
            spec = slide_spec_for(version.compiled, slide, config)
            kept = await reusable_pointer(version.screenshot, spec, self.store)
            if kept is not None:
                pointers[version.id] = kept
            else:
                todo.append((version, spec))
        reused = len(pointers)
        outcomes = await render_specs(self.validator, ctx, [spec for _v, spec in todo])
        fresh: dict[int, dict[str, Any]] = {}
        for (version, spec), outcome in zip(todo, outcomes, strict=True):
            result = rendered(version.page_name, outcome)
            fresh[version.id] = screenshot_pointer(spec, result, job_id=ctx.id, render_id=None)

        async def point(conn: AsyncConnection) -> None:
            for version_id, pointer in fresh.items():
                if not await page_version_set_screenshot(conn, version_id, pointer):
                    raise RuntimeError(f"page version {version_id} is gone")

        if keep:
            ctx.on_success(point)
        pointers.update(fresh)
        return Pictures(
            {v.page_name: pointers[v.id] for v in versions}, rendered=len(fresh), reused=reused
        )
