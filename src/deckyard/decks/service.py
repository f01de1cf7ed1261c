"""`DeckService`: stores decks and runs the deck jobs (validate, edit, screenshot, build, export).

Construction registers the job handlers on the runtime (queue `decks`) and the `publish` task
kind on the task executor; the API and `deckyard render` call the methods below.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.asset_edits import AssetEdits, StagedReplace
from deckyard.decks.compile.documents import CompileReport, compile_deck_report
from deckyard.decks.deck_edits import DeckEdits
from deckyard.decks.errors import CompileProblem
from deckyard.decks.jobs.deck_outputs import DeckOutputs
from deckyard.decks.jobs.deck_pages import STORED, DeckPageJobs
from deckyard.decks.jobs.deck_style import DeckStyleJob
from deckyard.decks.jobs.names import (
    DECK_QUEUE,
    PDF_FORMAT,
    PUBLISH_TASK,
    DeckEvent,
    DeckJobKind,
)
from deckyard.decks.jobs.page_jobs import PageJobs
from deckyard.decks.jobs.publish import publish_task
from deckyard.decks.jobs.site_jobs import SiteJobs
from deckyard.decks.offload import Offload, source_bytes
from deckyard.decks.page_edits import PageEdits
from deckyard.decks.sites import SiteService
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.store import (
    DeckRow,
    PageVersionRow,
    deck_get,
    deck_insert,
    deck_list,
    page_find,
    page_version_by_number,
    page_version_set_screenshot,
    page_versions_list,
)
from deckyard.decks.validation.page_check import PageValidator
from deckyard.decks.validation.render_check import RenderGateway
from deckyard.decks.validation.result import ValidationResult
from deckyard.jobs import Job, Runtime
from deckyard.outputs.site import SITE
from deckyard.render.control.service import RenderService
from deckyard.tasks import TaskExecutor

EVENT_EXTRAS = ("page", "render_id", "render_ms", "cached")
"""Keys of a `validation` event besides the validation result itself."""

ONE_ATTEMPT = (DeckJobKind.PAGE_EDIT, DeckJobKind.DECK_STYLE)
"""Write-gate jobs: a refused write is an answer, not something to retry."""


@dataclass(frozen=True)
class DeckCreated:
    """A stored deck's id and the compile problems its pages have (stored all the same)."""

    deck_id: int
    problems: list[CompileProblem]


class DeckService:
    """The deck domain's entry point for the API and the CLI."""

    def __init__(
        self,
        db: Database,
        runtime: Runtime,
        render: RenderService,
        tasks: TaskExecutor,
        settings: Settings,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.render = render
        self.tasks = tasks
        self.settings = settings
        self.clock = clock
        self.limits = DeckLimits.from_settings(settings)
        self.offload = Offload(settings)
        self.gateway = RenderGateway(render, runtime)
        self.validator = PageValidator(self.gateway, settings, self.offload)
        self.page_jobs = PageJobs(db, settings, clock, self.gateway, self.validator)
        self.outputs = DeckOutputs(db, settings, render.store, self.validator, self.limits)
        self.deck_pages = DeckPageJobs(db, render.store, self.validator)
        self.pages = PageEdits(db, clock)
        self.edits = DeckEdits(db, render.store, clock)
        self.assets = AssetEdits(db, self.limits, settings.deck_max_file_bytes, clock)
        self.sites = SiteService(db, render.store, settings, clock)
        handlers = {
            DeckJobKind.PAGE_VALIDATE: self.page_jobs.validate,
            DeckJobKind.PAGE_EDIT: self.page_jobs.edit,
            DeckJobKind.PAGE_SCREENSHOT: self.page_jobs.screenshot,
            DeckJobKind.DECK_STYLE: DeckStyleJob(db, clock, self.validator).run,
            DeckJobKind.DECK_BUILD: self.outputs.build,
            DeckJobKind.DECK_EXPORT: self.outputs.export,
            DeckJobKind.SITE_GO_LIVE: SiteJobs(
                db, settings, render.store, clock, runtime=runtime
            ).go_live,
            DeckJobKind.DECK_VALIDATE: self.deck_pages.validate,
            DeckJobKind.DECK_SCREENSHOTS: self.deck_pages.screenshots,
        }
        for kind, fn in handlers.items():
            runtime.handler(
                kind.value,
                queue=DECK_QUEUE,
                max_attempts=1
                if kind in (DeckJobKind.PAGE_EDIT, DeckJobKind.DECK_STYLE)
                else settings.deck_job_max_attempts,
                timeout=settings.deck_job_timeout_seconds,
            )(fn)
        tasks.register(publish_task(db))

    async def close(self) -> None:
        """Stop the compile worker processes, if any were started."""
        await self.offload.stop()

    # --- decks --------------------------------------------------------------------------------

    async def create_deck(
        self, workspace_id: str, source: DeckSource, report: CompileReport | None = None
    ) -> DeckCreated:
        """Store a loaded deck with a first version of every page, compiled where it compiles.

        The compile runs off the event loop (`Offload`). `report` is the deck's
        `compile_deck_report` when the caller compiled it already (say, while the renderer was
        starting).
        """
        if report is None:
            report = await self.offload.run(
                source_bytes(source), compile_deck_report, source, self.limits
            )
        compiled = {p.name: (p.document, p.sha256) for p in report.pages}
        now = self.clock.now()
        deck_id = await self.db.write(
            lambda conn: deck_insert(self.db, conn, workspace_id, source, compiled, now)
        )
        return DeckCreated(deck_id, report.problems)

    async def deck(self, workspace_id: str, deck_id: int) -> DeckRow | None:
        """A deck of the workspace with its pages' current versions, or None."""
        async with self.db.read_connection() as conn:
            return await deck_get(conn, deck_id, workspace_id)

    async def decks(self, workspace_id: str, limit: int) -> list[Any]:
        """The workspace's decks, newest first."""
        async with self.db.read_connection() as conn:
            return await deck_list(conn, workspace_id, limit)

    async def page_versions(
        self, workspace_id: str, deck_id: int, page: str
    ) -> list[PageVersionRow] | None:
        """Every version of a page, oldest first; None when the deck or page is not there."""
        async with self.db.read_connection() as conn:
            if await deck_get(conn, deck_id, workspace_id) is None:
                return None
            page_id = await page_find(conn, deck_id, page)
            return None if page_id is None else await page_versions_list(conn, page_id)

    async def page_version(self, page_id: int, number: int) -> PageVersionRow | None:
        """A page's version `number`."""
        async with self.db.read_connection() as conn:
            return await page_version_by_number(conn, page_id, number)

    # --- jobs ---------------------------------------------------------------------------------

    async def _enqueue(
        self, kind: DeckJobKind, payload: dict[str, Any], workspace_id: str, dedupe: str | None
    ) -> Job:
        return await self.runtime.enqueue(
            kind.value,
            payload,
            queue=DECK_QUEUE,
            workspace_id=workspace_id,
            dedupe_key=f"{kind.value}:{workspace_id}:{dedupe}" if dedupe else None,
        )

    async def validate_page(self, workspace_id: str, deck_id: int, page: str) -> Job:
        """Enqueue `page.validate` for a page's current version."""
        return await self._enqueue(
            DeckJobKind.PAGE_VALIDATE, {"deck_id": deck_id, "page": page}, workspace_id, None
        )

    async def validate_deck(self, workspace_id: str, deck_id: int, *, stored: bool = False) -> Job:
        """Enqueue `deck.validate`: every page's current version, in one deck render (`stored`:
        the versions' stored compiles are current, so the deck is not compiled again)."""
        payload: dict[str, Any] = {"deck_id": deck_id}
        if stored:
            payload["compiled"] = STORED
        return await self._enqueue(DeckJobKind.DECK_VALIDATE, payload, workspace_id, None)

    async def screenshot_deck(self, workspace_id: str, deck_id: int, config: dict[str, Any]) -> Job:
        """Enqueue `deck.screenshots`: every current version at `config`, rendered once."""
        payload = {"deck_id": deck_id, "config": config}
        return await self._enqueue(DeckJobKind.DECK_SCREENSHOTS, payload, workspace_id, None)

    async def edit_page(
        self,
        workspace_id: str,
        deck_id: int,
        page: str,
        source: str,
        *,
        kind: str | None = None,
        skip_visual_verification: bool = False,
        base: int | None = None,
        create: bool = False,
        actor: int | None = None,
    ) -> Job:
        """Enqueue `page.edit`, the write gate (`create`: the page may be new; `base`: If-Match)."""
        payload = {
            "deck_id": deck_id,
            "page": page,
            "source": source,
            "kind": kind,
            "skip_visual_verification": skip_visual_verification,
            "base": base,
            "create": create,
            "actor_token_id": actor,
        }
        return await self._enqueue(DeckJobKind.PAGE_EDIT, payload, workspace_id, None)

    async def screenshot_page(
        self, workspace_id: str, deck_id: int, version_id: int, config: dict[str, Any]
    ) -> Job:
        """Enqueue `page.screenshot`, or join the active one for this version and config."""
        digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
        payload = {"deck_id": deck_id, "version_id": version_id, "config": config}
        return await self._enqueue(
            DeckJobKind.PAGE_SCREENSHOT, payload, workspace_id, f"{version_id}:{digest}"
        )

    async def share_pictures(self, workspace_id: str, source_id: int, target_id: int) -> int:
        """Give each page version of deck `target_id` whose compiled document is a page's of
        deck `source_id` that page's picture pointer: the picture is of the same document (a
        pointer names the render's content hash, so it is only ever used for a spec it
        renders). How many were given. `deckyard render` does this for the deck of the pages
        that passed, so its pictures are the ones their validation rendered."""
        source = await self.deck(workspace_id, source_id)
        target = await self.deck(workspace_id, target_id)
        if source is None or target is None:
            return 0
        pictures = {
            v.compiled_sha256: v.screenshot
            for v in source.pages
            if v.compiled_sha256 is not None and v.screenshot is not None
        }
        given = [
            (v.id, pictures[v.compiled_sha256])
            for v in target.pages
            if v.screenshot is None and v.compiled_sha256 in pictures
        ]

        async def point(conn: AsyncConnection) -> None:
            for version_id, pointer in given:
                await page_version_set_screenshot(conn, version_id, pointer)

        if given:
            await self.db.write(point)
        return len(given)

    async def build(self, workspace_id: str, deck_id: int) -> Job:
        """Enqueue the site ZIP: `deck.export` of `zip`."""
        return await self.export(workspace_id, deck_id, fmt=SITE.name)

    async def export(
        self,
        workspace_id: str,
        deck_id: int,
        *,
        tagged: bool = False,
        steps: bool = False,
        fmt: str = PDF_FORMAT,
        stored: bool = False,
        print_key: str | None = None,
    ) -> Job:
        """Enqueue `deck.export` of format `fmt` of `deckyard.outputs` (the PDF by default, the
        PPTX): `tagged` asks for Chromium's tagged PDF, `steps` for a page per step of each
        slide (`compile.steps`), `stored` says the versions' stored compiles are current, and
        `print_key` names the deck's print document, compiled and stored by the caller."""
        payload: dict[str, Any] = {"deck_id": deck_id}
        if tagged:
            payload["tagged"] = True
        if steps:
            payload["steps"] = True
        if fmt != PDF_FORMAT:
            payload["format"] = fmt
        if stored:
            payload["compiled"] = STORED
        if print_key is not None:
            payload["print_document"] = print_key
        return await self._enqueue(DeckJobKind.DECK_EXPORT, payload, workspace_id, None)

    async def publish(
        self,
        workspace_id: str,
        deck_id: int,
        *,
        visibility: str | None = None,
        actor_token_id: int | None = None,
    ) -> int:
        """Create a `publish` task: validate, screenshot every page, build, export, go live.

        `visibility` (`public` or `private`) defaults to `site_default_visibility`.
        """
        params: dict[str, Any] = {
            "deck_id": deck_id,
            "visibility": visibility or self.settings.site_default_visibility,
            "actor_token_id": actor_token_id,
        }
        return await self.tasks.create(PUBLISH_TASK, params, workspace_id=workspace_id)

    async def restyle(
        self,
        workspace_id: str,
        deck_id: int,
        *,
        theme_css: str | None = None,
        manifest: dict[str, Any] | None = None,
        skip_visual_verification: bool = False,
        base: int | None = None,
        actor: int | None = None,
    ) -> Job:
        """Enqueue `deck.style`: a theme and/or manifest edit through the write gate."""
        payload = {
            "deck_id": deck_id,
            "theme_css": theme_css,
            "manifest": manifest,
            "skip_visual_verification": skip_visual_verification,
            "base": base,
            "actor_token_id": actor,
        }
        return await self._enqueue(DeckJobKind.DECK_STYLE, payload, workspace_id, None)

    async def replace_asset(
        self,
        workspace_id: str,
        deck_id: int,
        staged: StagedReplace,
        *,
        skip_visual_verification: bool = False,
        base: int | None = None,
        actor: int | None = None,
    ) -> Job:
        """Enqueue `deck.style` for an asset replacement: the pages that use it are validated
        with the new bytes, and the asset is repointed only when all of them passed."""
        payload = {
            "deck_id": deck_id,
            "asset": staged.payload(),
            "skip_visual_verification": skip_visual_verification,
            "base": base,
            "actor_token_id": actor,
        }
        return await self._enqueue(DeckJobKind.DECK_STYLE, payload, workspace_id, None)

    async def validations_of(self, job_id: int) -> dict[str, ValidationResult]:
        """Each page's validation result a deck job reported in its events."""
        found: dict[str, ValidationResult] = {}
        async for ev in self.runtime.events(job_id, follow=False):
            if ev.type == DeckEvent.VALIDATION.value and isinstance(ev.data, dict):
                data = {k: v for k, v in ev.data.items() if k not in EVENT_EXTRAS}
                found[str(ev.data.get("page"))] = ValidationResult.model_validate(data)
        return found

    async def page_seconds(self, job_id: int) -> dict[str, float | None]:
        """Each page's render time (seconds) in a deck job's `validation` events, where known;
        None for a page whose render came from the render cache (not rendered by this job)."""
        found: dict[str, float | None] = {}
        async for ev in self.runtime.events(job_id, follow=False):
            if ev.type == DeckEvent.VALIDATION.value and isinstance(ev.data, dict):
                ms = ev.data.get("render_ms")
                if ev.data.get("cached"):
                    found[str(ev.data.get("page"))] = None
                elif isinstance(ms, int | float):
                    found[str(ev.data.get("page"))] = ms / 1000
        return found

    async def validation_of(self, job_id: int) -> ValidationResult | None:
        """The validation result a page job reported in its events, if it got that far."""
        found: ValidationResult | None = None
        async for ev in self.runtime.events(job_id, follow=False):
            if ev.type == DeckEvent.VALIDATION.value and isinstance(ev.data, dict):
                data = {k: v for k, v in ev.data.items() if k not in EVENT_EXTRAS}
                found = ValidationResult.model_validate(data)
        return found
