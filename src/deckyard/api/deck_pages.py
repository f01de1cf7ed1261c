"""Page routes: read, create or edit through the write gate, delete, rename, reorder, history.

Reads answer an `ETag` (the page's version number, or the deck's version for the deck); writes
take `If-Match`. Content changes (edit, create, revert) are `page.edit` jobs, the write gate;
delete, rename and reorder change no content and are written directly under a row lock.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from deckyard.api.auth import Principal, current_principal
from deckyard.api.deck_style import gate_crashed
from deckyard.api.deck_views import (
    DeckCopy,
    DeckOut,
    PageDiffOut,
    PageEdit,
    PageEditOut,
    PageOrder,
    PageOut,
    PageRename,
    PageRevert,
    PageVersionOut,
)
from deckyard.api.decks import accepted, deck_service, owned_deck, page_of
from deckyard.api.errors import ApiError
from deckyard.api.jobs import JobOut
from deckyard.api.params import RowId
from deckyard.api.preconditions import IF_MATCH_DESCRIPTION, conflict, etag, if_match
from deckyard.decks.errors import DeckEditError, DeckEditErrorCode
from deckyard.decks.jobs.names import DeckJobErrorCode
from deckyard.decks.source.deck_source import PAGE_NAME_PATTERN
from deckyard.decks.store import DeckRow, PageVersionRow
from deckyard.decks.validation.result import ValidationStatus
from deckyard.jobs import Job, JobStatus

router = APIRouter(prefix="/v1/decks", tags=["pages"])
Caller = Annotated[Principal, Depends(current_principal)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description=IF_MATCH_DESCRIPTION)]
PAGE_NAME = re.compile(PAGE_NAME_PATTERN)
VERSION_MAX = 2**31 - 1
VersionNumber = Annotated[int, Path(ge=1, le=VERSION_MAX, description="A version number.")]
GATE_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"model": JobOut, "description": "Still validating; follow the job."},
    409: {"description": "`EDIT_CONFLICT`: If-Match is stale; `current_version` says where."},
    422: {"description": "Validation failed: no version written; `validation` says why."},
    428: {"description": "If-Match is required by this server and was not sent."},
    503: {"description": "The renderer was unavailable: not verified, no version written."},
}
DIRECT_RESPONSES: dict[int | str, dict[str, Any]] = {
    409: {"description": "`EDIT_CONFLICT` (stale If-Match), `PAGE_EXISTS` or `DECK_LAST_PAGE`."},
    428: {"description": "If-Match is required by this server and was not sent."},
}


def edit_refused(exc: DeckEditError) -> ApiError:
    """The HTTP answer to a refused direct edit."""
    if exc.code is DeckEditErrorCode.EDIT_CONFLICT:
        return ApiError(
            409,
            str(exc.code),
            exc.message,
            field="If-Match",
            headers={"ETag": etag(exc.current or 0)},
            extra={"current_version": exc.current},
        )
    missing = (DeckEditErrorCode.PAGE_NOT_FOUND, DeckEditErrorCode.DECK_NOT_FOUND)
    status = 404 if exc.code in missing else 409
    if exc.code is DeckEditErrorCode.ORDER_MISMATCH:
        status = 422
    return ApiError(status, str(exc.code), exc.message, field=exc.field)


@router.delete("/{deck_id:int}", status_code=204, responses=DIRECT_RESPONSES)
async def delete_deck(
    request: Request, principal: Caller, deck_id: RowId, if_match_header: IfMatch = None
) -> Response:
    """Delete a deck with its pages, history, assets and the screenshots its versions made.

    `If-Match` is the deck's ETag. Build and export artefacts belong to their jobs and go
    with job retention.
    """
    service = deck_service(request)
    base = if_match(if_match_header, service.settings)
    await owned_deck(request, principal, deck_id)
    try:
        await service.edits.delete(deck_id, base)
    except DeckEditError as exc:
        raise edit_refused(exc) from None
    return Response(status_code=204)


@router.post("/{deck_id:int}/copy", status_code=201, response_model=DeckOut)
async def copy_deck(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    body: Annotated[DeckCopy | None, Body()] = None,
) -> JSONResponse:
    """Copy a deck: its pages' current versions (as version 1, validation kept), its assets."""
    deck = await owned_deck(request, principal, deck_id)
    title = (body.title if body and body.title else None) or f"{deck.title} (copy)"[:300]
    try:
        new_id = await deck_service(request).edits.copy(deck_id, title)
    except DeckEditError as exc:
        raise edit_refused(exc) from None
    made = await owned_deck(request, principal, new_id)
    return JSONResponse(
        DeckOut.of(made).model_dump(mode="json"),
        status_code=201,
        headers={"ETag": etag(made.version), "Location": f"/v1/decks/{new_id}"},
    )


@router.get("/{deck_id:int}/pages/{page}", response_model=PageOut)
async def get_page(
    request: Request, response: Response, principal: Caller, deck_id: RowId, page: str
) -> PageOut:
    """A page's current version with its source and validation; `ETag` is its version."""
    current = page_of(await owned_deck(request, principal, deck_id), page)
    response.headers["ETag"] = etag(current.number)
    return PageOut.of_source(current)


async def _through_gate(
    request: Request,
    principal: Principal,
    deck: DeckRow,
    page: str,
    source: str,
    *,
    kind: str | None,
    skip: bool,
    base: int | None,
) -> JSONResponse:
    """Run `page.edit` for `page` (created when new) and answer its outcome."""
    service = deck_service(request)
    current = next((p for p in deck.pages if p.page_name == page), None)
    if current is None:
        if not PAGE_NAME.match(page):
            raise ApiError(
                422,
                "INVALID_INPUT",
                "page: names use letters, digits, '.', '_' and '-' (max 100, no leading dot)",
                field="page",
            )
        if base is not None and base != deck.version:
            raise conflict(f"deck {deck.id}", deck.version, base)
    elif base is not None and base != current.number:
        raise conflict(f"page {page!r}", current.number, base)
    job = await service.edit_page(
        principal.workspace_id,
        deck.id,
        page,
        source,
        kind=kind,
        skip_visual_verification=skip,
        base=base,
        create=current is None,
        actor=principal.token_id,
    )
    try:
        done = await service.runtime.wait(job.id, timeout=service.settings.deck_api_wait_seconds)
    except TimeoutError:
        return accepted(job)
    if done.status != JobStatus.SUCCEEDED or not isinstance(done.result, dict):
        raise await _gate_refused(request, principal, deck.id, page, done)
    version = await service.page_version(
        int(done.result["page_id"]), int(done.result["version_number"])
    )
    if version is None:
        raise ApiError(500, "VERSION_MISSING", f"job {done.id} succeeded but wrote no version")
    body = PageEditOut(
        job_id=done.id, created=bool(done.result.get("created")), version=PageVersionOut.of(version)
    )
    return JSONResponse(
        body.model_dump(mode="json"),
        status_code=201,
        headers={
            "ETag": etag(version.number),
            "Location": f"/v1/decks/{deck.id}/pages/{page}/versions/{version.number}",
        },
    )


async def _gate_refused(
    request: Request, principal: Principal, deck_id: RowId, page: str, job: Job
) -> ApiError:
    """The answer to a `page.edit` job that did not write: 409, 422, 503 (or 500 on a crash)."""
    if job.error_code == DeckJobErrorCode.EDIT_CONFLICT:
        deck = await owned_deck(request, principal, deck_id)
        now = next((p.number for p in deck.pages if p.page_name == page), deck.version)
        return ApiError(
            409,
            "EDIT_CONFLICT",
            f"{job.error_message}; the current version is {now}; reload and edit again",
            field="If-Match",
            headers={"ETag": etag(now)},
            extra={"current_version": now, "job_id": job.id},
        )
    validation = await deck_service(request).validation_of(job.id)
    extra: dict[str, Any] = {"job_id": job.id}
    if validation is not None:
        extra["validation"] = validation.model_dump(mode="json")
    code = job.error_code or "VALIDATION_FAILED"
    message = job.error_message or code
    if code == DeckJobErrorCode.TOO_MANY_PAGES:
        return ApiError(422, code, message, field="page", extra=extra)
    if validation is not None and validation.status is ValidationStatus.FAILED:
        return ApiError(422, "VALIDATION_FAILED", message, extra=extra)
    crashed = gate_crashed(job, extra)
    if crashed is not None:
        return crashed
    return ApiError(503, code, f"{message} No version was written; retry later.", extra=extra)


@router.put(
    "/{deck_id:int}/pages/{page}",
    status_code=201,
    response_model=PageEditOut,
    responses=GATE_RESPONSES,
)
async def edit_page(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    page: str,
    edit: Annotated[PageEdit, Body()],
    if_match_header: IfMatch = None,
) -> JSONResponse:
    """Create or edit a page through the write gate: a new version only when validation passed.

    On a page the deck does not have, this creates it at the end of the deck (`kind` defaults
    to `md`); its `If-Match`, when sent, is then the deck's ETag.
    """
    base = if_match(if_match_header, deck_service(request).settings)
    deck = await owned_deck(request, principal, deck_id)
    return await _through_gate(
        request,
        principal,
        deck,
        page,
        edit.source,
        kind=edit.kind,
        skip=edit.skip_visual_verification,
        base=base,
    )


@router.delete("/{deck_id:int}/pages/{page}", status_code=204, responses=DIRECT_RESPONSES)
async def delete_page(
    request: Request, principal: Caller, deck_id: RowId, page: str, if_match_header: IfMatch = None
) -> Response:
    """Delete a page and its history (If-Match: the page's ETag); a deck keeps one page."""
    service = deck_service(request)
    base = if_match(if_match_header, service.settings)
    await owned_deck(request, principal, deck_id)
    try:
        await service.pages.delete(deck_id, page, base)
    except DeckEditError as exc:
        raise edit_refused(exc) from None
    deck = await owned_deck(request, principal, deck_id)
    return Response(status_code=204, headers={"ETag": etag(deck.version)})


async def _deck_answer(request: Request, principal: Principal, deck_id: RowId) -> JSONResponse:
    deck = await owned_deck(request, principal, deck_id)
    return JSONResponse(
        DeckOut.of(deck).model_dump(mode="json"), headers={"ETag": etag(deck.version)}
    )


@router.post(
    "/{deck_id:int}/pages/{page}/rename", response_model=DeckOut, responses=DIRECT_RESPONSES
)
async def rename_page(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    page: str,
    body: Annotated[PageRename, Body()],
    if_match_header: IfMatch = None,
) -> JSONResponse:
    """Rename a page, keeping its history (If-Match: the page's ETag); answers the deck."""
    service = deck_service(request)
    base = if_match(if_match_header, service.settings)
    await owned_deck(request, principal, deck_id)
    try:
        await service.pages.rename(deck_id, page, body.name, base)
    except DeckEditError as exc:
        raise edit_refused(exc) from None
    return await _deck_answer(request, principal, deck_id)


@router.put("/{deck_id:int}/order", response_model=DeckOut, responses=DIRECT_RESPONSES)
async def reorder_pages(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    body: Annotated[PageOrder, Body()],
    if_match_header: IfMatch = None,
) -> JSONResponse:
    """Show the pages in the order given, which names each page once (If-Match: the deck's)."""
    service = deck_service(request)
    base = if_match(if_match_header, service.settings)
    await owned_deck(request, principal, deck_id)
    try:
        await service.pages.reorder(deck_id, body.pages, base)
    except DeckEditError as exc:
        raise edit_refused(exc) from None
    return await _deck_answer(request, principal, deck_id)


@router.get("/{deck_id:int}/pages/{page}/versions", response_model=list[PageVersionOut])
async def list_versions(
    request: Request, response: Response, principal: Caller, deck_id: RowId, page: str
) -> list[PageVersionOut]:
    """Every version of a page, oldest first; `ETag` is the page's current version."""
    deck = await owned_deck(request, principal, deck_id)
    response.headers["ETag"] = etag(page_of(deck, page).number)
    versions = await deck_service(request).page_versions(principal.workspace_id, deck_id, page)
    if versions is None:
        raise ApiError(404, "NOT_FOUND", f"no page {page!r} in deck {deck_id}")
    return [PageVersionOut.of(v) for v in versions]


async def _version(
    request: Request, principal: Principal, deck_id: RowId, page: str, number: int
) -> PageVersionRow:
    current = page_of(await owned_deck(request, principal, deck_id), page)
    found = await deck_service(request).page_version(current.page_id, number)
    if found is None:
        raise ApiError(404, "NOT_FOUND", f"page {page!r} has no version {number}", field="number")
    return found


@router.get("/{deck_id:int}/pages/{page}/versions/{number}", response_model=PageOut)
async def get_version(
    request: Request,
    response: Response,
    principal: Caller,
    deck_id: RowId,
    page: str,
    number: VersionNumber,
) -> PageOut:
    """One version of a page, with its source (versions never change: `ETag` is its number)."""
    found = await _version(request, principal, deck_id, page, number)
    response.headers["ETag"] = etag(found.number)
    return PageOut.of_source(found)


@router.get("/{deck_id:int}/pages/{page}/diff", response_model=PageDiffOut)
async def diff_versions(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    page: str,
    from_version: Annotated[int, Query(alias="from", ge=1, le=VERSION_MAX)],
    to_version: Annotated[int, Query(alias="to", ge=1, le=VERSION_MAX)],
) -> PageDiffOut:
    """The unified diff of a page's source from version `from` to version `to`."""
    page_of(await owned_deck(request, principal, deck_id), page)
    found = await deck_service(request).pages.diff(deck_id, page, from_version, to_version)
    if found is None:
        raise ApiError(
            404, "NOT_FOUND", f"page {page!r} lacks version {from_version} or {to_version}"
        )
    return PageDiffOut(
        page=found.page, from_version=found.from_number, to_version=found.to_number, diff=found.diff
    )


@router.post(
    "/{deck_id:int}/pages/{page}/versions/{number}/revert",
    status_code=201,
    response_model=PageEditOut,
    responses=GATE_RESPONSES,
)
async def revert_page(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    page: str,
    number: VersionNumber,
    options: Annotated[PageRevert | None, Body()] = None,
    if_match_header: IfMatch = None,
) -> JSONResponse:
    """Bring back version `number` as a new version, through the write gate like an edit."""
    base = if_match(if_match_header, deck_service(request).settings)
    old = await _version(request, principal, deck_id, page, number)
    deck = await owned_deck(request, principal, deck_id)
    return await _through_gate(
        request,
        principal,
        deck,
        page,
        old.source,
        kind=old.kind,
        skip=(options or PageRevert()).skip_visual_verification,
        base=base,
    )
