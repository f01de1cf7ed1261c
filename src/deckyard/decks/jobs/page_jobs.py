"""The deck job handlers: validate a page, edit a page (the write gate) and screenshot a page.

Every write that must only happen when the job really succeeded (a new page version, a
validation record, a screenshot pointer) runs in `ctx.on_success`, inside the transaction of the
job's finish compare-and-set: a refused, failed or lost job leaves no row behind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.jobs.handler_support import load_deck, refused, workspace_of
from deckyard.decks.jobs.names import DeckEvent, DeckJobErrorCode
from deckyard.decks.jobs.screenshots import (
    render_pointer,
    reusable_pointer,
    screenshot_pointer,
    validation_pointer,
)
from deckyard.decks.source.deck_source import (
    DEFAULT_SLIDE_HEIGHT,
    DEFAULT_SLIDE_WIDTH,
    DeckSource,
    PageKind,
    PageSource,
)
from deckyard.decks.store import (
    deck_get,
    deck_touch,
    page_find,
    page_insert,
    page_version_get,
    page_version_insert,
    page_version_next_number,
    page_version_set_screenshot,
    page_version_set_validation,
)
from deckyard.decks.store_pages import deck_lock, page_lock, page_names
from deckyard.decks.validation.page_check import PageCheck, PageValidator
from deckyard.decks.validation.render_check import RenderGateway
from deckyard.decks.validation.rules import is_validation_passed
from deckyard.jobs import JobContext, JobError
from deckyard.render.control.models import ScreenshotSpec


@dataclass(frozen=True)
class GateCheck:
    """The write gate's verdict on one page source, and the write to run if it passed."""

    check: PageCheck
    validation: dict[str, Any]
    passed: bool
    write: Callable[[AsyncConnection], Awaitable[None]]
    summary: dict[str, Any]

    def refusal(self) -> JobError:
        """The job error of a refused write (content or infrastructure code from the check)."""
        result = self.check.result
        return refused(result.error_code or "VALIDATION_FAILED", result.summary)


class PageJobs:
    """Handlers of `page.validate`, `page.edit` and `page.screenshot`."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        clock: Clock,
        gateway: RenderGateway,
        validator: PageValidator,
    ) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock
        self.gateway = gateway
        self.validator = validator

    async def _report(self, ctx: JobContext, check: PageCheck) -> dict[str, Any]:
        data = check.result.model_dump(mode="json")
        await ctx.emit(
            DeckEvent.VALIDATION, {"page": check.name, "render_id": check.render_id, **data}
        )
        return data

    async def validate(self, ctx: JobContext) -> dict[str, Any]:
        """Validate a page's current version; record the result on it only when it passed."""
        workspace = workspace_of(ctx)
        row, source = await load_deck(self.db, int(ctx.payload["deck_id"]), workspace)
        name = str(ctx.payload["page"])
        current = next((p for p in row.pages if p.page_name == name), None)
        if current is None:
            raise refused(DeckJobErrorCode.PAGE_NOT_FOUND, f"no page {name!r}")
        check = await self.validator.check(source, name, workspace_id=workspace, parent_id=ctx.id)
        data = await self._report(ctx, check)
        if not is_validation_passed(check.result):
            raise refused(check.result.error_code or "VALIDATION_FAILED", check.result.summary)

        pointer = validation_pointer(check, current, job_id=ctx.id)

        async def record(conn: AsyncConnection) -> None:
            await page_version_set_validation(conn, current.id, data)
            if pointer is not None:
                await page_version_set_screenshot(conn, current.id, pointer)

        ctx.on_success(record)
        return {"page": name, "version_id": current.id, "validation": data}

    async def edit(self, ctx: JobContext) -> dict[str, Any]:
        """The write gate: a new page version only when the edited page passes validation.

        A page the deck does not have yet is created (at the end) when the payload says
        `create`. `base` is the version the client edited (its `If-Match`: the page's
        version, or the deck's for a new page); when that moved on meanwhile the write is
        refused with `EDIT_CONFLICT`. Without `base` the last writer wins, and the job records
        an `unconditional_write` event.

        With `skip_visual_verification` the render stage is skipped on purpose; the write is
        then allowed when the page compiles, and the skip is recorded in the version and as a
        job event.
        """
        workspace = workspace_of(ctx)
        deck_id = int(ctx.payload["deck_id"])
        _row, source = await load_deck(self.db, deck_id, workspace)
        name = str(ctx.payload["page"])
        old = source.page(name)
        if old is None and not ctx.payload.get("create"):
            raise refused(DeckJobErrorCode.PAGE_NOT_FOUND, f"no page {name!r}")
        if old is None and len(source.pages) >= self.settings.deck_max_pages:
            raise refused(
                DeckJobErrorCode.TOO_MANY_PAGES,
                f"a deck has at most {self.settings.deck_max_pages} pages",
            )
        kind = PageKind(ctx.payload.get("kind") or (old.kind if old else PageKind.MARKDOWN))
        edited = PageSource(name=name, kind=kind, text=str(ctx.payload["source"]))
        skip = bool(ctx.payload.get("skip_visual_verification", False))
        base = ctx.payload.get("base")
        if base is None:
            await ctx.emit(DeckEvent.UNCONDITIONAL_WRITE, {"page": name})
        gate = await self.gate(
            ctx, deck_id, source, edited, skip=skip, base=None if base is None else int(base)
        )
        if not gate.passed:
            raise gate.refusal()
        ctx.on_success(gate.write)
        return gate.summary

    async def gate(
        self,
        ctx: JobContext,
        deck_id: int,
        source: DeckSource,
        edited: PageSource,
        *,
        skip: bool = False,
        base: int | None = None,
    ) -> GateCheck:
        """Validate `edited` in its deck (added as a new last page when the deck lacks it).

        Reports the validation as a job event and returns the check with the write to
        register with `ctx.on_success` when it passed (the version is written inside the
        finish compare-and-set, so a lost or refused finish writes nothing). Every writer of
        page versions, a person's edit or a model's, goes through here.

        The write locks the page (or, for a new page, the deck) row, compares its head with
        `base` when given (`EDIT_CONFLICT` otherwise) and numbers the version after the head
        it found; it then fills `summary` in with `page_id` and `version_number` (before the
        write they hold the numbers seen while validating). The version records the payload's
        `actor_token_id`, or, when the payload names none (a model's jobs), the job's actor.
        """
        workspace = workspace_of(ctx)
        name, kind = edited.name, edited.kind
        actor = ctx.payload.get("actor_token_id")
        if actor is None:
            actor = ctx.job.actor_token_id
        is_new = source.page(name) is None
        pages = [edited if p.name == name else p for p in source.pages]
        deck = source.model_copy(update={"pages": [*pages, edited] if is_new else pages})
        if skip:
            await ctx.emit(DeckEvent.SKIPPED_VISUAL_VERIFICATION, {"page": name})
        check = await self.validator.check(
            deck, name, workspace_id=workspace, parent_id=ctx.id, skip_render=skip
        )
        data = await self._report(ctx, check)
        passed = check.compiled is not None and is_validation_passed(
            check.result, require_render=not skip
        )
        async with self.db.read_connection() as conn:
            page_id = None if is_new else await page_find(conn, deck_id, name)
            if page_id is None and not is_new:
                raise refused(DeckJobErrorCode.PAGE_NOT_FOUND, f"no page {name!r}")
            number = 1 if page_id is None else await page_version_next_number(conn, page_id)
        compiled = check.compiled
        # render once: the render that validated the edit is the new version's screenshot
        shot = render_pointer(check, job_id=ctx.id)
        summary: dict[str, Any] = {
            "page": name,
            "page_id": page_id,
            "version_number": number,
            "created": is_new,
            "if_match": base,
            "skipped_visual_verification": skip,
            "validation": data,
        }

        async def write(conn: AsyncConnection) -> None:
            assert compiled is not None
            now = self.clock.now()
            target = await self._locked_target(conn, deck_id, name, base, is_new, now)
            written = await page_version_next_number(conn, target)
            version_id = await page_version_insert(
                conn,
                target,
                kind.value,
                edited.text,
                compiled.document,
                compiled.sha256,
                now,
                validation=data,
                skipped=skip,
                actor_token_id=actor,
                number=written,
            )
            if shot is not None:
                await page_version_set_screenshot(conn, version_id, shot)
            await deck_touch(conn, deck_id, now)
            summary.update(page_id=target, version_number=written)

        return GateCheck(check, data, passed, write, summary)

    async def _locked_target(
        self,
        conn: AsyncConnection,
        deck_id: int,
        name: str,
        base: int | None,
        is_new: bool,
        now: datetime,
    ) -> int:
        """The id of the page to write, its row (or the deck's, for a new page) locked."""
        if is_new:
            head = await deck_lock(conn, deck_id)
            if head is None:
                raise refused(DeckJobErrorCode.DECK_NOT_FOUND, f"no deck {deck_id}")
            if base is not None and head != base:
                raise edit_conflict(f"deck {deck_id} is at version {head}, not {base}")
            if await page_find(conn, deck_id, name) is not None:
                raise edit_conflict(f"page {name!r} was created meanwhile")
            position = len(await page_names(conn, deck_id))
            return await page_insert(conn, deck_id, name, position, now)
        found = await page_find(conn, deck_id, name)
        head = None if found is None else await page_lock(conn, found)
        if found is None or head is None:
            raise refused(DeckJobErrorCode.PAGE_NOT_FOUND, f"no page {name!r}")
        if base is not None and head != base:
            raise edit_conflict(f"page {name!r} is at version {head}, not {base}")
        return found

    async def screenshot(self, ctx: JobContext) -> dict[str, Any]:
        """Screenshot one page version; it becomes the version's pointer at the finish CAS."""
        workspace = workspace_of(ctx)
        deck_id, version_id = int(ctx.payload["deck_id"]), int(ctx.payload["version_id"])
        config: dict[str, Any] = dict(ctx.payload.get("config") or {})
        async with self.db.read_connection() as conn:
            deck_row = await deck_get(conn, deck_id, workspace)
            if deck_row is None:
                raise refused(DeckJobErrorCode.DECK_NOT_FOUND, f"no deck {deck_id}")
            version = await page_version_get(conn, version_id, deck_id)
        if version is None:
            raise refused(DeckJobErrorCode.VERSION_NOT_FOUND, f"no page version {version_id}")
        if version.compiled is None:
            raise JobError(
                DeckJobErrorCode.NOT_COMPILED,
                f"page {version.page_name} version {version.number} did not compile",
                retryable=False,
            )
        slide = deck_row.manifest.get("slide") or {}
        spec = slide_spec_for(version.compiled, slide, config)
        kept = await reusable_pointer(version.screenshot, spec, self.gateway.render.store)
        if kept is not None:
            await ctx.emit(DeckEvent.SCREENSHOT_REUSED, {"from_job_id": kept.get("job_id")})
            return {"page": version.page_name, "version_id": version_id, **kept, "reused": True}
        outcome = await self.gateway.run(
            spec,
            workspace_id=workspace,
            parent_id=ctx.id,
            timeout=self.settings.deck_job_timeout_seconds,
        )
        if outcome.error_code is not None:
            raise refused(outcome.error_code, outcome.message or outcome.error_code)
        pointer = screenshot_pointer(
            spec,
            outcome.result,
            job_id=ctx.id,
            render_id=outcome.request_id,
        )

        async def point(conn: AsyncConnection) -> None:
            if not await page_version_set_screenshot(conn, version_id, pointer):
                raise RuntimeError(f"page version {version_id} is gone")

        ctx.on_success(point)
        return {"page": version.page_name, "version_id": version_id, **pointer}


def edit_conflict(message: str) -> JobError:
    """The refusal of a write whose base version is no longer the current one."""
    return refused(DeckJobErrorCode.EDIT_CONFLICT, message)


def slide_spec_for(document: str, slide: dict[str, Any], config: dict[str, Any]) -> ScreenshotSpec:
    """A screenshot spec of a stored page document at the deck's slide size and `config`."""
    return ScreenshotSpec.model_validate(
        {
            "html": document,
            "width": int(slide.get("width", DEFAULT_SLIDE_WIDTH)),
            "height": int(slide.get("height", DEFAULT_SLIDE_HEIGHT)),
            "scale": float(config.get("scale", 1.0)),
            "format": str(config.get("format", "png")),
        }
    )
