"""AI authoring routes: model page edits and new pages, generated images, the model catalog.

Each POST enqueues a durable job and answers 202 with it; follow `/v1/jobs/{id}` or its SSE
stream (`/v1/jobs/{id}/events`: one `ai_round` event per round). With no provider configured
every route here answers 503 `AI_NOT_CONFIGURED`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse
from prometheus_client.core import CounterMetricFamily, Metric
from pydantic import BaseModel, ConfigDict, Field

from deckyard.ai.errors import AiErrorCode
from deckyard.ai.service import AiService
from deckyard.api.auth import Principal, admin_principal, current_principal
from deckyard.api.decks import accepted, owned_deck, page_of
from deckyard.api.errors import ApiError
from deckyard.api.jobs import JobOut
from deckyard.api.params import RowId
from deckyard.decks.source.deck_source import PAGE_NAME_PATTERN, PageKind

router = APIRouter(tags=["ai"])
Caller = Annotated[Principal, Depends(current_principal)]
Admin = Annotated[Principal, Depends(admin_principal)]
MAX_TEXT = 20_000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AiEditIn(_Body):
    """What the model should change."""

    instruction: str = Field(min_length=1, max_length=MAX_TEXT)
    skip_visual_verification: bool = False


class AiCreateIn(_Body):
    """What the new page should say."""

    prompt: str = Field(min_length=1, max_length=MAX_TEXT)
    kind: PageKind = PageKind.MARKDOWN
    skip_visual_verification: bool = False


class ImageIn(_Body):
    """The image to generate."""

    prompt: str = Field(min_length=1, max_length=MAX_TEXT)
    size: str = Field("1024x1024", pattern=r"^\d{1,5}x\d{1,5}$")


class SlideIn(_Body):
    """The slide size of a generated deck."""

    width: int = Field(1920, ge=16, le=8192)
    height: int = Field(1080, ge=16, le=8192)


class OutlineIn(_Body):
    """A deck to write: its title and one line per slide after the title slide."""

    title: str = Field(min_length=1, max_length=300)
    outline: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        min_length=1, max_length=98
    )
    kind: PageKind = PageKind.MARKDOWN
    slide: SlideIn = Field(default_factory=SlideIn)
    skip_visual_verification: bool = False


class OutlineOut(BaseModel):
    """The new deck and the one job whose status is the whole outline's."""

    deck_id: int = Field(description="The new deck; it holds the title slide at once.")
    job: JobOut = Field(
        description="The `ai.deck_outline` job (follow `/v1/jobs/{id}`): `succeeded` only once "
        "every slide was written (its result lists them), `failed` as soon as one slide could "
        "not be written (its `error_code` is that slide's, its message names the slide and "
        "its job); cancelling it cancels the slide being written."
    )


class ModelOut(BaseModel):
    """One model of the provider's catalog."""

    id: str
    owned_by: str | None
    created: int | None
    first_seen_at: datetime


def ai_service(request: Request) -> AiService:
    """The app's AI service; 503 `AI_NOT_CONFIGURED` without a provider."""
    service: AiService = request.app.state.ai
    if not service.configured:
        raise ApiError(
            503,
            AiErrorCode.NOT_CONFIGURED,
            "no AI provider is configured; set DECKYARD_AI_BASE_URL (see docs/ai.md)",
        )
    return service


AI_RESPONSES: dict[int | str, dict[str, object]] = {
    503: {"description": "AI_NOT_CONFIGURED: no provider is configured."}
}


@router.post(
    "/v1/decks/{deck_id:int}/pages/{page}/ai-edit",
    status_code=202,
    response_model=JobOut,
    responses=AI_RESPONSES,
)
async def ai_edit_page(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    page: str,
    body: Annotated[AiEditIn, Body()],
) -> JSONResponse:
    """Have the model change a page; a version is written only when validation passed."""
    service = ai_service(request)
    page_of(await owned_deck(request, principal, deck_id), page)
    job = await service.edit_page(
        principal.workspace_id,
        deck_id,
        page,
        body.instruction,
        skip_visual_verification=body.skip_visual_verification,
    )
    return accepted(job)


@router.post(
    "/v1/decks/{deck_id:int}/pages/{page}/ai-create",
    status_code=202,
    response_model=JobOut,
    responses={**AI_RESPONSES, 409: {"description": "The deck already has that page."}},
)
async def ai_create_page(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    page: str,
    body: Annotated[AiCreateIn, Body()],
) -> JSONResponse:
    """Have the model write a new page (appended to the deck) through the write gate."""
    service = ai_service(request)
    if not re.match(PAGE_NAME_PATTERN, page):
        raise ApiError(422, "INVALID_PAGE_NAME", f"{page!r} is not a page name", field="page")
    deck = await owned_deck(request, principal, deck_id)
    if any(p.page_name == page for p in deck.pages):
        raise ApiError(409, AiErrorCode.PAGE_EXISTS, f"deck {deck_id} already has page {page!r}")
    job = await service.create_page(
        principal.workspace_id,
        deck_id,
        page,
        body.prompt,
        kind=body.kind.value,
        skip_visual_verification=body.skip_visual_verification,
    )
    return accepted(job)


@router.post(
    "/v1/decks/{deck_id:int}/assets:generate",
    status_code=202,
    response_model=JobOut,
    responses=AI_RESPONSES,
)
async def generate_asset(
    request: Request, principal: Caller, deck_id: RowId, body: Annotated[ImageIn, Body()]
) -> JSONResponse:
    """Generate an image and store it as a deck asset; the job's result names its `path`."""
    service = ai_service(request)
    if body.size not in service.settings.ai_image_sizes:
        allowed = ", ".join(service.settings.ai_image_sizes)
        raise ApiError(422, "INVALID_IMAGE_SIZE", f"size must be one of {allowed}", field="size")
    await owned_deck(request, principal, deck_id)
    job = await service.generate_image(principal.workspace_id, deck_id, body.prompt, body.size)
    return accepted(job)


@router.post(
    "/v1/decks/from-outline",
    status_code=202,
    response_model=OutlineOut,
    responses={
        **AI_RESPONSES,
        202: {
            "description": "The deck was created with its title slide; `job` (also the "
            "`Location`) is the `ai.deck_outline` job that writes the other slides and whose "
            "status is the whole outline's."
        },
    },
)
async def deck_from_outline(
    request: Request, principal: Caller, body: Annotated[OutlineIn, Body()]
) -> JSONResponse:
    """Create a deck with a title slide; the model then writes one slide per outline line.

    Answers one job, `ai.deck_outline`: it writes the slides in order, each as an
    `ai.page_create` child through the write gate, and succeeds only when all were written.
    """
    service = ai_service(request)
    deck_id, job = await service.deck_from_outline(
        principal.workspace_id,
        body.title,
        body.outline,
        kind=body.kind.value,
        width=body.slide.width,
        height=body.slide.height,
        skip_visual_verification=body.skip_visual_verification,
    )
    out = OutlineOut(deck_id=deck_id, job=JobOut.of(job))
    return JSONResponse(
        out.model_dump(mode="json"), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"}
    )


@router.get("/v1/ai/models", response_model=list[ModelOut], responses=AI_RESPONSES)
async def list_models(request: Request, principal: Caller) -> list[ModelOut]:
    """The provider's models as of the last catalog sync."""
    rows = await ai_service(request).models()
    return [
        ModelOut(
            id=r.model_id, owned_by=r.owned_by, created=r.created, first_seen_at=r.first_seen_at
        )
        for r in rows
    ]


@router.post("/v1/ai/models/sync", status_code=202, response_model=JobOut, responses=AI_RESPONSES)
async def sync_models(request: Request, principal: Admin) -> JSONResponse:
    """Sync the model catalog now (admin tokens): answers the `ai.catalog_sync` job.

    It is a system job (no workspace), shown to admin tokens at `/v1/jobs/{id}` and in
    `/v1/jobs?system=true`, like the cron's own runs.
    """
    return accepted(await ai_service(request).sync_catalog())


def ai_metrics(service: AiService) -> Callable[[], Iterator[Metric]]:
    """A `/metrics` source: catalog syncs that failed and that changed the catalog."""

    def collect() -> Iterator[Metric]:
        catalog = service.catalog
        if catalog is None:
            return
        failed = CounterMetricFamily(
            "deckyard_ai_catalog_sync_failures", "Model catalog syncs whose provider call failed."
        )
        failed.add_metric([], catalog.failures)
        changed = CounterMetricFamily(
            "deckyard_ai_catalog_changes", "Model catalog syncs that found a changed list."
        )
        changed.add_metric([], catalog.changes)
        yield failed
        yield changed

    return collect
