"""Validates one page of a deck: the compile stage, then the render stage through the renderer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from deckyard.config import Settings
from deckyard.decks.compile.documents import CompiledPage, compile_page
from deckyard.decks.errors import CompileError
from deckyard.decks.offload import Offload
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.validation.combine import combine_results
from deckyard.decks.validation.render_check import RenderGateway
from deckyard.decks.validation.result import ValidationResult
from deckyard.decks.validation.rules import (
    compile_outcome,
    render_outcome_skipped,
    validation_result,
)
from deckyard.render.control.models import ScreenshotSpec

SKIP_REASON = "skip_visual_verification was requested"


def slide_spec(page: CompiledPage, *, fmt: str = "png", scale: float = 1.0) -> ScreenshotSpec:
    """A validating screenshot of a compiled page at its slide size (audited: the page audit's
    findings are part of its validation)."""
    return ScreenshotSpec.model_validate(
        {
            "html": page.document,
            "width": page.width,
            "height": page.height,
            "scale": scale,
            "format": fmt,
            "audit": True,
        }
    )


@dataclass(frozen=True)
class PageCheck:
    """A page's validation result, its compiled form when it compiled, and the render job.

    `spec` and `render` are the render that checked the page and its committed result (artefact
    key, size, sha256, diagnostics) when the renderer answered; the same visit's PNG is the page
    version's screenshot (render once).
    """

    name: str
    result: ValidationResult
    compiled: CompiledPage | None
    render_id: int | None = None
    spec: ScreenshotSpec | None = None
    render: dict[str, Any] | None = None


class PageValidator:
    """Runs both validation stages for pages of a `DeckSource`."""

    def __init__(self, gateway: RenderGateway, settings: Settings, offload: Offload) -> None:
        self.gateway = gateway
        self.settings = settings
        self.limits = DeckLimits.from_settings(settings)
        self.offload = offload

    async def check(
        self,
        deck: DeckSource,
        name: str,
        *,
        workspace_id: str,
        parent_id: int | None = None,
        skip_render: bool = False,
        keep_artifact: bool = True,
    ) -> PageCheck:
        """Compile page `name` in `deck`, then render it unless it failed or `skip_render`.

        Without `keep_artifact` the render's screenshot is deleted once its diagnostics are in.
        The compile runs off the event loop (`Offload`).
        """
        page = deck.page(name)
        size = len(page.text if page is not None else "") + len(deck.theme_css or "")
        try:
            compiled = await self.offload.run(size, compile_page, deck, name, self.limits)
        except CompileError as exc:
            skipped = render_outcome_skipped("the page did not compile")
            return PageCheck(
                name, validation_result(compile_outcome(exc.problems), skipped, page=name), None
            )
        if skip_render:
            render = render_outcome_skipped(SKIP_REASON)
            return PageCheck(
                name, validation_result(compile_outcome([]), render, page=name), compiled
            )
        spec = slide_spec(compiled)
        outcome = await self.gateway.run(
            spec,
            workspace_id=workspace_id,
            parent_id=parent_id,
            timeout=self.settings.deck_validate_render_timeout_seconds,
            keep_artifact=keep_artifact,
        )
        stage = outcome.stage(accessibility_errors=self.settings.deck_accessibility_errors)
        result = validation_result(compile_outcome([]), stage, page=name)
        return PageCheck(
            name,
            result,
            compiled,
            outcome.request_id,
            spec=spec,
            render=outcome.result if outcome.error_code is None and outcome.result else None,
        )

    async def check_deck(
        self,
        deck: DeckSource,
        *,
        workspace_id: str,
        parent_id: int | None = None,
        keep_artifacts: bool = True,
    ) -> tuple[ValidationResult, list[PageCheck]]:
        """Every page checked (concurrently; the renderer's slots bound it) and the deck result."""
        checks = await asyncio.gather(
            *(
                self.check(
                    deck,
                    page.name,
                    workspace_id=workspace_id,
                    parent_id=parent_id,
                    keep_artifact=keep_artifacts,
                )
                for page in deck.pages
            )
        )
        return combine_results({c.name: c.result for c in checks}), list(checks)
