"""Asset routes: list, download, upload or replace (raw body), delete (refused while in use).

An asset's path in these routes is relative to the deck's `assets/` folder: `PUT
/v1/decks/1/assets/img/logo.png` stores `assets/img/logo.png`, the path pages refer to.
Writes take the deck's ETag as `If-Match` and move the deck's version.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from deckyard.api.auth import Principal, current_principal
from deckyard.api.content_headers import attachment, is_inline
from deckyard.api.deck_style import gate_outcome
from deckyard.api.deck_views import ProblemOut
from deckyard.api.decks import deck_service, owned_deck
from deckyard.api.errors import ApiError
from deckyard.api.params import RowId
from deckyard.api.preconditions import IF_MATCH_DESCRIPTION, etag, if_match
from deckyard.decks.asset_edits import AssetRefused, StagedReplace
from deckyard.decks.store import deck_source
from deckyard.decks.store_assets import deck_asset_list

router = APIRouter(prefix="/v1/decks", tags=["assets"])
Caller = Annotated[Principal, Depends(current_principal)]
IfMatch = Annotated[str | None, Header(alias="If-Match", description=IF_MATCH_DESCRIPTION)]
RAW_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}


class AssetOut(BaseModel):
    """An asset: its deck path, the media type sniffed from its content, size and hash."""

    path: str
    media_type: str
    size: int
    sha256: str


def refused(exc: AssetRefused) -> ApiError:
    """The HTTP answer to a refused asset write, with the references that block a delete."""
    extra: dict[str, object] = {}
    headers = None
    if exc.references:
        extra["references"] = [ProblemOut.of(p).model_dump() for p in exc.references]
    if exc.current is not None:
        extra["current_version"] = exc.current
        headers = {"ETag": etag(exc.current)}
    return ApiError(
        exc.status, exc.code, exc.message, field=exc.field, headers=headers, extra=extra
    )


@router.get("/{deck_id:int}/assets", response_model=list[AssetOut])
async def list_assets(request: Request, principal: Caller, deck_id: RowId) -> list[AssetOut]:
    """The deck's assets, by path."""
    await owned_deck(request, principal, deck_id)
    async with deck_service(request).db.read_connection() as conn:
        rows = await deck_asset_list(conn, deck_id)
    return [AssetOut(path=p, media_type=t, size=n, sha256=h) for p, t, n, h in rows]


@router.get("/{deck_id:int}/assets/{path:path}", response_class=Response)
async def get_asset(request: Request, principal: Caller, deck_id: RowId, path: str) -> Response:
    """An asset's bytes with its sniffed media type; `ETag` is its SHA-256.

    Served sandboxed (`deckyard.api.content_headers`): an image is shown, never run; anything
    else (a script, a stylesheet, a font, HTML) is a download.
    """
    deck = await owned_deck(request, principal, deck_id)
    async with deck_service(request).db.read_connection() as conn:
        source = await deck_source(conn, deck)
    asset = source.assets.get(f"assets/{path}")
    if asset is None:
        raise ApiError(404, "NOT_FOUND", f"deck {deck_id} has no asset assets/{path}")
    headers = {"ETag": f'"{hashlib.sha256(asset.data).hexdigest()}"'}
    if not is_inline(asset.media_type):
        headers["Content-Disposition"] = attachment(path.rsplit("/", 1)[-1])
    return Response(asset.data, media_type=asset.media_type, headers=headers)


@router.put(
    "/{deck_id:int}/assets/{path:path}",
    response_model=AssetOut,
    status_code=201,
    openapi_extra=RAW_BODY,
    responses={
        200: {"model": AssetOut, "description": "Replaced an existing asset."},
        202: {"description": "Re-validating the pages that use it; follow the job."},
        409: {"description": "`EDIT_CONFLICT`: If-Match is stale."},
        413: {"description": "Over `deck_max_file_bytes`."},
        415: {"description": "Type unknown, unsupported, or not what the name says."},
        422: {"description": "A page that uses it failed with the new bytes; nothing written."},
        503: {"description": "The renderer was unavailable: not verified, nothing written."},
    },
)
async def put_asset(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    path: str,
    if_match_header: IfMatch = None,
    skip_visual_verification: Annotated[
        bool,
        Query(description="Replace after compiling the pages that use it, without rendering."),
    ] = False,
) -> JSONResponse:
    """Upload (201) or replace (200) an asset; the type is sniffed from the bytes sent.

    A replacement that pages use goes through the write gate: those pages are validated with
    the new bytes and the asset changes only when every one of them passed (as a theme edit).
    """
    service = deck_service(request)
    base = if_match(if_match_header, service.settings)
    await owned_deck(request, principal, deck_id)
    try:
        stored = await service.assets.put(
            principal.workspace_id, deck_id, f"assets/{path}", await request.body(), base
        )
    except AssetRefused as exc:
        raise refused(exc) from None
    if isinstance(stored, StagedReplace):
        job = await service.replace_asset(
            principal.workspace_id,
            deck_id,
            stored,
            skip_visual_verification=skip_visual_verification,
            base=base,
            actor=principal.token_id,
        )
        out = AssetOut(
            path=stored.path, media_type=stored.media_type, size=stored.size, sha256=stored.sha256
        )
        return await gate_outcome(
            request, principal, deck_id, job, body=out.model_dump(), status_code=200
        )
    deck = await owned_deck(request, principal, deck_id)
    body = AssetOut(
        path=stored.path, media_type=stored.media_type, size=stored.size, sha256=stored.sha256
    )
    return JSONResponse(
        body.model_dump(),
        status_code=201 if stored.created else 200,
        headers={"ETag": etag(deck.version)},
    )


@router.delete(
    "/{deck_id:int}/assets/{path:path}",
    status_code=204,
    responses={409: {"description": "`ASSET_IN_USE` with `references` (page, line, reference)."}},
)
async def delete_asset(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    path: str,
    force: Annotated[bool, Query(description="Delete even while pages refer to it.")] = False,
    if_match_header: IfMatch = None,
) -> Response:
    """Delete an asset; while a page, the theme or a font refers to it: 409 unless `force`."""
    service = deck_service(request)
    base = if_match(if_match_header, service.settings)
    await owned_deck(request, principal, deck_id)
    try:
        found = await service.assets.delete(
            principal.workspace_id, deck_id, f"assets/{path}", force=force, base=base
        )
    except AssetRefused as exc:
        raise refused(exc) from None
    if not found:
        raise ApiError(404, "NOT_FOUND", f"deck {deck_id} has no asset assets/{path}")
    return Response(status_code=204)
