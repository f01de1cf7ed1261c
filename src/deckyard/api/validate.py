"""`POST /v1/validate`: check a page source or a whole deck ZIP without storing anything.

`valid` is true exactly when the result passed (`is_validation_passed`). When the renderer was
unavailable the answer is `valid=false`, the infrastructure error code and HTTP 503, never a
200 that could be read as a pass (rule Q0).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deckyard.api.auth import Principal, current_principal
from deckyard.api.deck_views import ValidateOut
from deckyard.api.decks import deck_service, source_refused
from deckyard.api.errors import ApiError, error_body
from deckyard.api.params import body_schema
from deckyard.api.remote_fetch import with_remote_files
from deckyard.api.workspace_settings import fetch_remote_for
from deckyard.decks.errors import DeckSourceError
from deckyard.decks.source.deck_source import (
    DEFAULT_SLIDE_HEIGHT,
    DEFAULT_SLIDE_WIDTH,
    SourceWarning,
)
from deckyard.decks.source.json_body import load_deck_json
from deckyard.decks.source.markdown_file import load_markdown_bytes
from deckyard.decks.source.zip_archive import load_deck_zip
from deckyard.decks.validation.result import ValidationResult, ValidationStatus
from deckyard.decks.validation.rules import is_validation_passed

router = APIRouter(tags=["validate"])
Caller = Annotated[Principal, Depends(current_principal)]
PAGE_NAME = "page"


class SlideIn(BaseModel):
    """The slide size to check the page at."""

    model_config = ConfigDict(extra="forbid", strict=True)

    width: int = Field(DEFAULT_SLIDE_WIDTH, ge=16)
    height: int = Field(DEFAULT_SLIDE_HEIGHT, ge=16)


class ValidatePageIn(BaseModel):
    """One page's source to validate, with the slide size and an optional theme."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{"kind": "html", "source": "<h1>Hello</h1>"}]},
    )

    kind: Literal["html", "md"]
    source: str = Field(min_length=1)
    slide: SlideIn = Field(default_factory=SlideIn)
    theme_css: str | None = None
    lang: str = "en"


BODIES = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": body_schema(ValidatePageIn)},
            "application/zip": {"schema": {"type": "string", "format": "binary"}},
            "text/markdown": {"schema": {"type": "string"}},
        },
    }
}


def _page_deck(raw: bytes) -> dict[str, Any]:
    try:
        page = ValidatePageIn.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError(422, "INVALID_INPUT", f"{field}: {first['msg']}", field=field) from None
    return {
        "manifest": {"title": "validate", "lang": page.lang, "slide": page.slide.model_dump()},
        "pages": [{"name": PAGE_NAME, "kind": page.kind, "text": page.source}],
        "theme_css": page.theme_css,
    }


def _answer(
    result: ValidationResult,
    pages: dict[str, ValidationResult],
    warnings: list[SourceWarning] | None = None,
) -> JSONResponse:
    valid = is_validation_passed(result)
    body = ValidateOut(
        valid=valid,
        status=result.status.value,
        summary=result.summary,
        error_code=result.error_code,
        retryable=result.retryable,
        result=result,
        pages=pages,
        warnings=warnings or [],
    ).model_dump(mode="json")
    if result.status is ValidationStatus.UNAVAILABLE:
        code = result.error_code or "RENDER_SERVICE_UNAVAILABLE"
        body.update(error_body(code, result.summary))
        return JSONResponse(body, status_code=503)
    return JSONResponse(body, status_code=200)


@router.post(
    "/v1/validate",
    response_model=ValidateOut,
    openapi_extra=BODIES,
    responses={503: {"description": "Renderer unavailable: `valid=false`, not verified."}},
)
async def validate(request: Request, principal: Caller) -> JSONResponse:
    """Validate a page source (JSON), a deck (raw ZIP body, `Content-Type: application/zip`) or
    a one-file Markdown deck (`Content-Type: text/markdown`).

    200 with `valid` true (passed, warnings allowed) or false (failed, see `result`); 503 with
    `valid=false` and the renderer's error code when the render check could not run.
    """
    service = deck_service(request)
    raw = await request.body()
    content_type = request.headers.get("content-type", "")
    zipped = content_type.startswith("application/zip")
    markdown = content_type.startswith(("text/markdown", "text/x-markdown"))
    try:
        if zipped:
            deck = await asyncio.to_thread(load_deck_zip, raw, service.limits)
        elif markdown:
            deck = await service.offload.run(
                len(raw), load_markdown_bytes, raw, "deck.md", service.limits
            )
        else:
            deck = await asyncio.to_thread(load_deck_json, _page_deck(raw), service.limits)
    except DeckSourceError as exc:
        raise source_refused(exc) from None
    fetch = await fetch_remote_for(service.db, principal.workspace_id, service.settings)
    deck = await with_remote_files(deck, service.settings, fetch=fetch)
    combined, checks = await service.validator.check_deck(
        deck, workspace_id=principal.workspace_id, keep_artifacts=False
    )
    if not zipped and not markdown:
        return _answer(checks[0].result, {})
    return _answer(combined, {c.name: c.result for c in checks}, deck.warnings)
