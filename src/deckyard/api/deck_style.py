"""Theme and manifest routes: edits through the write gate, every page validated again.

Both answer 201 with the deck once every page passed and a new version of each was written;
422 naming the pages that failed (nothing written); 409 on a stale `If-Match` (the deck's
ETag); 503 when the renderer was unavailable; 202 with the job when it takes longer. A gate
job that crashed (`HANDLER_ERROR`) is a bug, answered 500 `INTERNAL_ERROR`, never a 503 that
tells the client to retry what would crash again.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from deckyard.api.auth import Principal, current_principal
from deckyard.api.deck_views import DeckOut
from deckyard.api.decks import accepted, deck_service, owned_deck
from deckyard.api.errors import ApiError
from deckyard.api.params import RowId
from deckyard.api.preconditions import IF_MATCH_DESCRIPTION, conflict, etag, if_match
from deckyard.decks.jobs.names import DeckJobErrorCode
from deckyard.decks.source.deck_source import LANG_PATTERN, FontSpec, SlideSize
from deckyard.decks.validation.result import ValidationStatus
from deckyard.jobs import Job, JobErrorCode, JobStatus

router = APIRouter(prefix="/v1/decks", tags=["decks"])
Caller = Annotated[Principal, Depends(current_principal)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description=IF_MATCH_DESCRIPTION)]
RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"description": "Still validating; follow the job."},
    409: {"description": "`EDIT_CONFLICT`: If-Match is stale; `current_version` says where."},
    422: {"description": "A page failed in the edited deck; `pages` says which and why."},
    503: {"description": "The renderer was unavailable: not verified, nothing written."},
}


class ThemeEdit(BaseModel):
    """The deck's new theme stylesheet."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"css": "h1 { color: #0a84ff; }"}]}
    )

    css: str = Field(max_length=2 * 1024 * 1024)
    skip_visual_verification: bool = False


class ManifestEdit(BaseModel):
    """The manifest fields to change (the others keep their values)."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [{"title": "Launch v2"}]}
    )

    title: str | None = Field(None, min_length=1, max_length=300)
    lang: str | None = Field(None, pattern=LANG_PATTERN)
    slide: SlideSize | None = None
    fonts: list[FontSpec] | None = None
    skip_visual_verification: bool = False


def gate_crashed(job: Job, extra: dict[str, Any]) -> ApiError | None:
    """500 `INTERNAL_ERROR` when a write-gate job crashed (`HANDLER_ERROR`), else None.

    A crash is a bug, not an outage: the same edit would crash again, so it is not answered
    with a 503 asking to retry. Content problems never get here: they are validation failures.
    """
    if job.error_code != JobErrorCode.HANDLER_ERROR:
        return None
    message = f"job {job.id} failed on a server error; nothing was written: {job.error_message}"
    return ApiError(500, "INTERNAL_ERROR", message, extra=extra)


async def gate_outcome(
    request: Request,
    principal: Principal,
    deck_id: int,
    job: Job,
    *,
    body: dict[str, Any] | None = None,
    status_code: int = 201,
) -> JSONResponse:
    """The answer to a `deck.style` job: `body` (default: the deck) once it wrote, 422 naming
    the pages that failed, 409 on a stale If-Match, 503 when unverified, 202 when still going."""
    service = deck_service(request)
    try:
        done = await service.runtime.wait(job.id, timeout=service.settings.deck_api_wait_seconds)
    except TimeoutError:
        return accepted(job)
    deck = await owned_deck(request, principal, deck_id)
    if done.status == JobStatus.SUCCEEDED:
        return JSONResponse(
            DeckOut.of(deck).model_dump(mode="json") if body is None else body,
            status_code=status_code,
            headers={"ETag": etag(deck.version)},
        )
    if done.error_code == DeckJobErrorCode.EDIT_CONFLICT:
        raise conflict(f"deck {deck_id}", deck.version, int(done.payload.get("base") or 0))
    results = await service.validations_of(done.id)
    pages = {name: r.model_dump(mode="json") for name, r in results.items()}
    message = done.error_message or str(done.error_code)
    extra = {"job_id": done.id, "pages": pages}
    if any(r.status is ValidationStatus.FAILED for r in results.values()):
        raise ApiError(422, "VALIDATION_FAILED", message, extra=extra)
    crashed = gate_crashed(done, extra)
    if crashed is not None:
        raise crashed
    raise ApiError(503, str(done.error_code), f"{message}; retry later", extra=extra)


async def deck_base(
    request: Request, principal: Principal, deck_id: int, header: str | None
) -> int | None:
    """The deck version an edit's `If-Match` names (None: unconditional); 409 when stale."""
    base = if_match(header, deck_service(request).settings)
    deck = await owned_deck(request, principal, deck_id)
    if base is not None and base != deck.version:
        raise conflict(f"deck {deck_id}", deck.version, base)
    return base


@router.put("/{deck_id:int}/theme", status_code=201, response_model=DeckOut, responses=RESPONSES)
async def edit_theme(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    body: Annotated[ThemeEdit, Body()],
    if_match_header: IfMatch = None,
) -> JSONResponse:
    """Replace the theme: every page is validated with it; all pass, or nothing is written."""
    service = deck_service(request)
    base = await deck_base(request, principal, deck_id, if_match_header)
    job = await service.restyle(
        principal.workspace_id,
        deck_id,
        theme_css=body.css,
        skip_visual_verification=body.skip_visual_verification,
        base=base,
        actor=principal.token_id,
    )
    return await gate_outcome(request, principal, deck_id, job)


@router.patch(
    "/{deck_id:int}/manifest", status_code=201, response_model=DeckOut, responses=RESPONSES
)
async def edit_manifest(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    body: Annotated[ManifestEdit, Body()],
    if_match_header: IfMatch = None,
) -> JSONResponse:
    """Change manifest fields (title, lang, slide size, fonts) through the write gate."""
    service = deck_service(request)
    base = await deck_base(request, principal, deck_id, if_match_header)
    changes = body.model_dump(mode="json", exclude_none=True, exclude={"skip_visual_verification"})
    if not changes:
        raise ApiError(
            422, "INVALID_INPUT", "body: name at least one field to change", field="body"
        )
    job = await service.restyle(
        principal.workspace_id,
        deck_id,
        manifest=changes,
        skip_visual_verification=body.skip_visual_verification,
        base=base,
        actor=principal.token_id,
    )
    return await gate_outcome(request, principal, deck_id, job)
