"""Serving published sites: `/sites/{workspace}/{deck}/` and every file below it.

No token is needed: a public site is served to anyone, a private one only below a share link's
path, `/sites/{workspace}/{deck}/_share/{token}/`, so the site's relative links keep the token.
HTML and the manifest are revalidated on every use (`Cache-Control: no-cache` with a strong
`ETag`, answered 304 on `If-None-Match`); content-hashed files are immutable for a year. Every
file is served under a sandboxing `Content-Security-Policy`, so a deck's scripts run in an
opaque origin and cannot use the dashboard's session on this host. HEAD answers the headers.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import RedirectResponse

from deckyard.api.errors import ApiError
from deckyard.api.sites import sites_of
from deckyard.db.types import BIG_ID_MAX
from deckyard.decks.site.hosting import etag_matches
from deckyard.decks.sites import SiteRefused

router = APIRouter(prefix="/sites", tags=["sites"])
Workspace = Annotated[str, Path(min_length=1, max_length=64, description="The workspace id.")]
DeckId = Annotated[int, Path(ge=1, le=BIG_ID_MAX, description="The deck id.")]
Token = Annotated[str, Path(min_length=1, max_length=300, description="A share link's token.")]
FILE_BODY = {"schema": {"type": "string", "format": "binary"}}
SITE_FILE: dict[str, Any] = {
    "response_class": Response,
    "responses": {
        200: {
            "description": "The file, with its content type (from its name: `text/html` for "
            "the index and pages), `ETag` and `Cache-Control`.",
            "content": {"text/html": FILE_BODY, "*/*": FILE_BODY},
        },
        304: {"description": "The `If-None-Match` ETag is current."},
        403: {
            "description": "`SHARE_LINK_INVALID`, `SHARE_LINK_EXPIRED` or "
            "`SHARE_LINK_REVOKED` (share-link routes)."
        },
        404: {"description": "`SITE_NOT_FOUND`: not published, private, or no such file."},
    },
}
METHODS = ["GET", "HEAD"]


async def answer(
    request: Request, workspace: str, deck_id: int, path: str, token: str | None
) -> Response:
    """The file at `path` of the deck's live site, honouring HEAD and `If-None-Match`."""
    sites = sites_of(request)
    try:
        found = await sites.file(workspace, deck_id, path, share_token=token)
        headers = {
            **found.headers,
            "ETag": found.etag,
            "Cache-Control": found.cache_control,
            "X-Deckyard-Publication": str(found.publication_id),
        }
        if etag_matches(request.headers.get("if-none-match"), found.etag):
            return Response(status_code=304, headers=headers)
        if request.method == "HEAD":
            headers["Content-Length"] = str(found.size)
            return Response(status_code=200, media_type=found.content_type, headers=headers)
        data = await sites.read(found)
    except SiteRefused as exc:
        raise ApiError(exc.status, exc.code, exc.message) from None
    return Response(data, media_type=found.content_type, headers=headers)


@router.api_route("/{workspace}/{deck_id:int}", methods=METHODS, include_in_schema=False)
async def site_root(workspace: Workspace, deck_id: DeckId) -> RedirectResponse:
    """The site's folder, with the slash its relative links need."""
    return RedirectResponse(f"/sites/{workspace}/{deck_id}/", status_code=308)


@router.api_route(
    "/{workspace}/{deck_id:int}/_share/{token}", methods=METHODS, include_in_schema=False
)
async def shared_root(workspace: Workspace, deck_id: DeckId, token: Token) -> RedirectResponse:
    """A share link's folder, with the slash its relative links need."""
    return RedirectResponse(f"/sites/{workspace}/{deck_id}/_share/{token}/", status_code=308)


SHARED = "/{workspace}/{deck_id:int}/_share/{token}/{path:path}"
PUBLIC = "/{workspace}/{deck_id:int}/{path:path}"


@router.get(SHARED, **SITE_FILE)
@router.head(SHARED, **SITE_FILE)
async def shared_file(
    request: Request, workspace: Workspace, deck_id: DeckId, token: Token, path: str
) -> Response:
    """A file of the deck's site through a share link (private or public); `""` is the index.

    The token is checked (signature, expiry, revocation) on every request, so a revoked or
    expired link answers 403 at once.
    """
    return await answer(request, workspace, deck_id, path, token)


@router.get(PUBLIC, **SITE_FILE)
@router.head(PUBLIC, **SITE_FILE)
async def site_file(request: Request, workspace: Workspace, deck_id: DeckId, path: str) -> Response:
    """A file of the deck's public site; `""` (the folder) is `index.html`."""
    return await answer(request, workspace, deck_id, path, None)
