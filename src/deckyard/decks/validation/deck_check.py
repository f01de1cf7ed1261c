"""Validates every page of a deck with one deck render request (one admission, one lease).

Each page goes through the same two stages as `PageValidator.check`, and its render stage is
mapped from its own outcome exactly as a single page's is (`RenderOutcome.stage`): a content
error code or the page's diagnostics decide `failed`/`passed`; a page the renderer did not
commit (no renderer, deadline, attempts spent) gets its request's infrastructure code, so it
reads `unavailable`, never passed (rule Q0).
"""

from __future__ import annotations

from typing import Any

from deckyard.decks.compile.documents import CompiledPage, compile_each
from deckyard.decks.errors import CompileError
from deckyard.decks.offload import source_bytes
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.validation.page_check import PageCheck, PageValidator, slide_spec
from deckyard.decks.validation.result import StageOutcome
from deckyard.decks.validation.rules import (
    compile_outcome,
    render_outcome_from_diagnostics,
    render_outcome_from_error,
    render_outcome_skipped,
    validation_result,
)
from deckyard.jobs import JobContext
from deckyard.render.control.deck_requests import PageRender
from deckyard.render.control.models import ScreenshotSpec
from deckyard.render.protocol import RenderErrorCode

NO_RENDERER = "no renderer is up; start one (deckyard serve --renderers 1) and retry"


def page_stage(outcome: PageRender, *, accessibility_errors: bool = False) -> StageOutcome:
    """The render stage of one page's outcome (the same mapping as a one-page render's)."""
    if outcome.error_code is not None:
        return render_outcome_from_error(outcome.error_code, outcome.message)
    return render_outcome_from_diagnostics(
        (outcome.result or {}).get("diagnostics") or {}, accessibility_errors=accessibility_errors
    )


async def render_specs(
    validator: PageValidator, ctx: JobContext, specs: list[ScreenshotSpec]
) -> list[PageRender]:
    """Render `specs` as one deck request of `ctx`'s job; unavailable when no renderer is up."""
    if not specs:
        return []
    if not await validator.gateway.renderer_live():
        code = RenderErrorCode.SERVICE_UNAVAILABLE.value
        return [PageRender(i, None, code, NO_RENDERER) for i in range(len(specs))]
    return await validator.gateway.render_pages(ctx, specs, ctx.job.workspace_id or "")


def compile_pages(
    each: dict[str, CompiledPage | CompileError],
) -> tuple[dict[str, CompiledPage], dict[str, PageCheck]]:
    """The pages that compiled (of `compile_each`'s outcome); the checks of those that did not
    (render skipped)."""
    compiled: dict[str, CompiledPage] = {}
    failed: dict[str, PageCheck] = {}
    for name, outcome in each.items():
        if isinstance(outcome, CompiledPage):
            compiled[name] = outcome
            continue
        skipped = render_outcome_skipped("the page did not compile")
        result = validation_result(compile_outcome(outcome.problems), skipped, page=name)
        failed[name] = PageCheck(name, result, None)
    return compiled, failed


async def check_pages(
    validator: PageValidator,
    deck: DeckSource,
    ctx: JobContext,
    stored: dict[str, CompiledPage] | None = None,
) -> list[PageCheck]:
    """Every page of `deck` compiled off the event loop (`Offload`: the loop keeps heartbeating
    and polling), then the compiled ones rendered in one deck request.

    `stored`, every page's compile as it was stored from this very source (the caller knows
    it is current), is used instead of compiling the deck again."""
    checks: dict[str, PageCheck] = {}
    if stored is not None and set(stored) == {page.name for page in deck.pages}:
        compiled = dict(stored)
    else:
        each = await validator.offload.run(source_bytes(deck), compile_each, deck, validator.limits)
        compiled, checks = compile_pages(each)
    names = list(compiled)
    specs = [slide_spec(compiled[name]) for name in names]
    for name, spec, outcome in zip(
        names, specs, await render_specs(validator, ctx, specs), strict=True
    ):
        stage = page_stage(
            outcome, accessibility_errors=validator.settings.deck_accessibility_errors
        )
        result = validation_result(compile_outcome([]), stage, page=name)
        rendered: dict[str, Any] | None = None
        if outcome.error_code is None and outcome.result:
            rendered = outcome.result
        checks[name] = PageCheck(name, result, compiled[name], spec=spec, render=rendered)
    return [checks[page.name] for page in deck.pages]
