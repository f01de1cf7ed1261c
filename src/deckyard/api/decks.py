"""Deck routes: create (JSON or ZIP), list, get, validate/screenshot a page, and deck jobs.

Page editing and history are in `api/deck_pages.py`.

Every deck is scoped to the caller's workspace; another workspace's deck is 404. Loading and
compiling a source run off the event loop (a thread, or a worker process for a large one:
`decks.offload`), so a big deck does not stall every other request meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from deckyard.api.auth import Principal, current_principal
from deckyard.api.deck_views import (
    DeckCreatedOut,
    DeckOut,
    DeckSummary,
    ProblemOut,
    ScreenshotConfig,
    TaskRef,
)
from deckyard.api.errors import ApiError
from deckyard.api.jobs import JobOut
from deckyard.api.params import RowId, body_schema
from deckyard.api.preconditions import etag
from deckyard.api.remote_fetch import with_remote_files
from deckyard.api.workspace_settings import fetch_remote_for
from deckyard.decks.errors import DeckSourceError
from deckyard.decks.jobs.names import PDF_FORMAT, PUBLISH_TASK
from deckyard.decks.service import DeckService
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.json_body import DeckJson, load_deck_json
from deckyard.decks.source.markdown_file import load_markdown_bytes
from deckyard.decks.source.zip_archive import load_deck_zip
from deckyard.decks.store import DeckRow, PageVersionRow
from deckyard.jobs import Job
from deckyard.outputs import OUTPUTS

router = APIRouter(prefix="/v1/decks", tags=["decks"])
Caller = Annotated[Principal, Depends(current_principal)]
ZIP_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
    }
}
MARKDOWN_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "text/markdown": {
                "schema": {"type": "string"},
                "example": "---\nmarp: true\n---\n\n# Hello\n\n---\n\n## Second slide\n",
            }
        },
    }
}
JSON_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": body_schema(DeckJson),
                "example": {
                    "manifest": {"title": "Hello", "slide": {"width": 1920, "height": 1080}},
                    "pages": [{"name": "01-hello", "kind": "md", "text": "# Hello"}],
                },
            }
        },
    }
}


class PublishIn(BaseModel):
    """Options of a publish; every field may be left out."""

    model_config = ConfigDict(extra="forbid")

    visibility: Literal["public", "private"] | None = Field(
        None,
        description="`public`: anyone may read the site; `private`: only through a share link. "
        "Default: the server's `DECKYARD_SITE_DEFAULT_VISIBILITY` (`private`).",
    )


EXPORT_FORMAT_UNKNOWN = "EXPORT_FORMAT_UNKNOWN"
EXPORT_OPTION_UNSUPPORTED = "EXPORT_OPTION_UNSUPPORTED"


class ExportIn(BaseModel):
    """Options of an export (`tagged` is for the PDF only); every field may be left out."""

    model_config = ConfigDict(extra="forbid")

    tagged: bool = Field(
        False,
        description="Chromium's tagged PDF: a structure tree for screen readers and reflow "
        "(a larger file).",
    )
    steps: bool = Field(
        False,
        description="A page per step of each slide (reveal.js fragments, Marp fragmented "
        "lists, Slidev clicks), numbered as their slide.",
    )


def deck_service(request: Request) -> DeckService:
    """The app's deck service."""
    service: DeckService = request.app.state.decks
    return service


def source_refused(exc: DeckSourceError) -> ApiError:
    """The 413/422 answer naming the field or file refused, and every other problem found."""
    extra: dict[str, Any] = {"file": exc.file}
    if exc.also:
        extra["problems"] = [p.to_dict() for p in exc.every()]
    return ApiError(
        exc.http_status, str(exc.code), exc.message, field=exc.field or exc.file, extra=extra
    )


async def owned_deck(request: Request, principal: Principal, deck_id: int) -> DeckRow:
    """The deck if it is in the caller's workspace; 404 otherwise."""
    row = await deck_service(request).deck(principal.workspace_id, deck_id)
    if row is None:
        raise ApiError(404, "NOT_FOUND", f"no deck {deck_id}")
    return row


def page_of(deck: DeckRow, page: str) -> PageVersionRow:
    """The current version of `page`; 404 when the deck has no such page."""
    found = next((p for p in deck.pages if p.page_name == page), None)
    if found is None:
        raise ApiError(404, "NOT_FOUND", f"deck {deck.id} has no page {page!r}")
    return found


def accepted(job: Job) -> JSONResponse:
    """202 with the job and its location."""
    return JSONResponse(
        JobOut.of(job).model_dump(mode="json"),
        status_code=202,
        headers={"Location": f"/v1/jobs/{job.id}"},
    )


async def _created(request: Request, principal: Principal, source: DeckSource) -> JSONResponse:
    service = deck_service(request)
    fetch = await fetch_remote_for(service.db, principal.workspace_id, service.settings)
    source = await with_remote_files(source, service.settings, fetch=fetch)
    made = await service.create_deck(principal.workspace_id, source)
    row = await owned_deck(request, principal, made.deck_id)
    body = DeckCreatedOut(
        **DeckOut.of(row).model_dump(),
        problems=[ProblemOut.of(p) for p in made.problems],
        warnings=source.warnings,
    )
    return JSONResponse(
        body.model_dump(mode="json"), status_code=201, headers={"Location": f"/v1/decks/{row.id}"}
    )


@router.post("", status_code=201, response_model=DeckCreatedOut, openapi_extra=JSON_BODY)
async def create_deck(request: Request, principal: Caller) -> JSONResponse:
    """Create a deck from its JSON form (manifest, pages, base64 assets, theme CSS).

    Pages that do not compile are stored and listed in `problems`; a refused body (unknown
    field, wrong type, bad path, too large) stores nothing and names the field.
    """
    service = deck_service(request)
    try:
        source = await asyncio.to_thread(load_deck_json, await request.body(), service.limits)
    except DeckSourceError as exc:
        raise source_refused(exc) from None
    return await _created(request, principal, source)


@router.post("/zip", status_code=201, response_model=DeckCreatedOut, openapi_extra=ZIP_BODY)
async def create_deck_zip(request: Request, principal: Caller) -> JSONResponse:
    """Create a deck from a ZIP sent as the raw body (`Content-Type: application/zip`).

    The archive holds `deck.toml`, `pages/` and `assets/` at its root or under one top folder.
    Path escapes, absolute paths, symlinks, too many entries and zip bombs are refused (422,
    or 413 for size) and nothing is stored.
    """
    service = deck_service(request)
    try:
        source = await asyncio.to_thread(load_deck_zip, await request.body(), service.limits)
    except DeckSourceError as exc:
        raise source_refused(exc) from None
    return await _created(request, principal, source)


@router.post(
    "/markdown", status_code=201, response_model=DeckCreatedOut, openapi_extra=MARKDOWN_BODY
)
async def create_deck_markdown(
    request: Request,
    principal: Caller,
    filename: Annotated[str, Query(min_length=1, max_length=200)] = "deck.md",
) -> JSONResponse:
    """Create a deck from one Markdown file (Marp, Slidev or reveal.js conventions) as the body.

    Slides are split at `---`; front matter and comment directives set the theme, size,
    classes, backgrounds, header, footer and pagination. What is not carried over is listed in
    `warnings`. A ZIP upload (`/v1/decks/zip`) may also hold one Markdown file and `assets/`.
    """
    service = deck_service(request)
    try:
        body = await request.body()
        source = await service.offload.run(
            len(body), load_markdown_bytes, body, filename, service.limits
        )
    except DeckSourceError as exc:
        raise source_refused(exc) from None
    return await _created(request, principal, source)


@router.get("", response_model=list[DeckSummary])
async def list_decks(
    request: Request, principal: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 100
) -> list[DeckSummary]:
    """The workspace's decks, newest first."""
    rows = await deck_service(request).decks(principal.workspace_id, limit)
    return [DeckSummary.model_validate(r._asdict()) for r in rows]


@router.get("/{deck_id:int}", response_model=DeckOut)
async def get_deck(
    request: Request, response: Response, principal: Caller, deck_id: RowId
) -> DeckOut:
    """A deck with its pages' current versions; `ETag` is the deck's version."""
    row = await owned_deck(request, principal, deck_id)
    response.headers["ETag"] = etag(row.version)
    return DeckOut.of(row)


@router.post("/{deck_id:int}/pages/{page}/validate", status_code=202, response_model=JobOut)
async def validate_page(
    request: Request, principal: Caller, deck_id: RowId, page: str
) -> JSONResponse:
    """Validate a page's current version as a job (`page.validate`)."""
    page_of(await owned_deck(request, principal, deck_id), page)
    return accepted(
        await deck_service(request).validate_page(principal.workspace_id, deck_id, page)
    )


@router.post("/{deck_id:int}/pages/{page}/screenshot", status_code=202, response_model=JobOut)
async def screenshot_page(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    page: str,
    config: Annotated[ScreenshotConfig | None, Body()] = None,
) -> JSONResponse:
    """Screenshot a page's current version at slide size; joins an active identical job.

    On success the image becomes the version's `screenshot`; fetch it at
    `/v1/jobs/{id}/artifact`.
    """
    current = page_of(await owned_deck(request, principal, deck_id), page)
    cfg = (config or ScreenshotConfig()).model_dump(mode="json")
    job = await deck_service(request).screenshot_page(
        principal.workspace_id, deck_id, current.id, cfg
    )
    return accepted(job)


@router.post("/{deck_id:int}/build", status_code=202, response_model=JobOut)
async def build_deck(request: Request, principal: Caller, deck_id: RowId) -> JSONResponse:
    """Build the static site ZIP as a job (`deck.export` of `zip`, as `.../export?format=zip`);
    its artefact is at `/v1/jobs/{id}/artifact`."""
    await owned_deck(request, principal, deck_id)
    return accepted(await deck_service(request).build(principal.workspace_id, deck_id))


@router.post("/{deck_id:int}/export", status_code=202, response_model=JobOut)
async def export_deck(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    body: Annotated[ExportIn | None, Body()] = None,
    fmt: Annotated[
        str,
        Query(
            alias="format",
            min_length=1,
            max_length=20,
            description="`pdf` (default); `pptx`: editable slides where the page allows, "
            "else the slide's picture, with a per-slide report (`pages`) in the job's result; "
            "`zip`: the static site, checked in Chromium (as `POST .../build`); `png`, "
            "`jpeg`, `webp`: a ZIP of a picture per page with its `manifest.json` (a PNG is "
            "the one the page's validation rendered).",
        ),
    ] = PDF_FORMAT,
) -> JSONResponse:
    """Export the deck as one PDF (a page per slide, at slide size), `?format=pptx`,
    `?format=zip` (the static site) or `?format=png|jpeg|webp` (a picture per page), as a job.

    The PDF has an outline of the slide titles, working `#slide-N` links and the deck's
    title, author and language. Body (optional): `{"tagged": true}` for a tagged PDF,
    `{"steps": true}` for a page per step of each slide (docs/user-guide.md, "Steps"), in
    the PDF, the PPTX or the pictures.
    """
    if fmt not in OUTPUTS:
        known = ", ".join(OUTPUTS)
        raise ApiError(
            422, EXPORT_FORMAT_UNKNOWN, f"no export format {fmt!r}; use {known}", field="format"
        )
    await owned_deck(request, principal, deck_id)
    tagged = body.tagged if body else False
    steps = body.steps if body else False
    if fmt != PDF_FORMAT and tagged:
        raise ApiError(422, EXPORT_OPTION_UNSUPPORTED, f"tagged applies to pdf, not {fmt}")
    if steps and not OUTPUTS[fmt].stepped:
        raise ApiError(
            422, EXPORT_OPTION_UNSUPPORTED, f"steps do not apply to {fmt}: it plays them itself"
        )
    job = await deck_service(request).export(
        principal.workspace_id, deck_id, tagged=tagged, steps=steps, fmt=fmt
    )
    return accepted(job)


@router.post("/{deck_id:int}/publish", status_code=202, response_model=TaskRef)
async def publish_deck(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    body: Annotated[PublishIn | None, Body()] = None,
) -> JSONResponse:
    """Publish as a task: validate every page, screenshot every page, build, export, go live.

    The verified site goes online at `/sites/{workspace}/{deck}/` only when every stage
    passed; until then the previous publication stays live. Body (optional):
    `{"visibility": "public"}` or `"private"` (served only through share links).
    """
    await owned_deck(request, principal, deck_id)
    task_id = await deck_service(request).publish(
        principal.workspace_id,
        deck_id,
        visibility=body.visibility if body else None,
        actor_token_id=principal.token_id,
    )
    return JSONResponse(
        TaskRef(task_id=task_id, kind=PUBLISH_TASK).model_dump(),
        status_code=202,
        headers={"Location": f"/v1/tasks/{task_id}"},
    )
