"""Dashboard pages for decks: the workspace's decks, and one deck with its pages (thumbnails
from their screenshots), each page's versions, and the deck's publications.

Read-only views over the same services the API uses, scoped to the signed-in workspace.
A thumbnail is the current version's screenshot, read from the artefact store by the key its
screenshot pointer names (the job that made it may be a validation, or the edit that wrote
the version and kept its validation render, whose own results are not images).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from deckyard.api.auth import Principal, current_principal
from deckyard.api.dashboard import not_found, page, signed_in, to_sign_in
from deckyard.api.deck_views import PageVersionOut
from deckyard.api.decks import deck_service
from deckyard.api.errors import ApiError
from deckyard.api.params import RowId
from deckyard.api.sites import PublicationOut
from deckyard.decks.sites import site_url

router = APIRouter(include_in_schema=False)
Caller = Annotated[Principal, Depends(current_principal)]
DECK_LIST_SIZE = 100
PUBLICATIONS_SHOWN = 20


@dataclass(frozen=True)
class PageView:
    """A page on the deck page: its current version and its history, newest first."""

    deck_id: int
    name: str
    current: PageVersionOut
    versions: list[PageVersionOut]

    @property
    def thumbnail(self) -> str | None:
        """Where the current version's screenshot is served, if it has one."""
        shot = self.current.screenshot
        if shot is None:
            return None
        return f"/ui/decks/{self.deck_id}/pages/{quote(self.name)}/thumbnail?v={shot.sha256[:12]}"

    @property
    def validation(self) -> str:
        """The current version's validation status, `unchecked` when it has none."""
        v = self.current.validation
        return str(v.status) if v else "unchecked"


@router.get("/ui/decks")
async def decks_page(request: Request) -> Response:
    """The workspace's decks, newest first, with whether each has a live site."""
    principal = await signed_in(request)
    if principal is None:
        return to_sign_in(request)
    service = deck_service(request)
    rows = await service.decks(principal.workspace_id, DECK_LIST_SIZE)
    decks: list[dict[str, Any]] = []
    for row in rows:
        live = await service.sites.live(principal.workspace_id, row.id)
        decks.append({**row._asdict(), "live": PublicationOut.of(live) if live else None})
    return page(request, "decks.html", principal, decks=decks, section="decks")


@router.get("/ui/decks/{deck_id:int}")
async def deck_page(request: Request, deck_id: RowId) -> Response:
    """One deck: pages with thumbnails and versions, and its publications."""
    principal = await signed_in(request)
    if principal is None:
        return to_sign_in(request)
    service = deck_service(request)
    deck = await service.deck(principal.workspace_id, deck_id)
    if deck is None:
        return not_found(request, principal, f"There is no deck #{deck_id} in this workspace.")
    pages = []
    for current in deck.pages:
        history = await service.page_versions(principal.workspace_id, deck_id, current.page_name)
        pages.append(
            PageView(
                deck_id,
                current.page_name,
                PageVersionOut.of(current),
                [PageVersionOut.of(v) for v in reversed(history or [])],
            )
        )
    publications = await service.sites.publications(deck_id, PUBLICATIONS_SHOWN)
    return page(
        request,
        "deck.html",
        principal,
        deck=deck,
        pages=pages,
        publications=[PublicationOut.of(p) for p in publications],
        site_url=site_url(principal.workspace_id, deck_id),
        section="decks",
    )


@router.get("/ui/decks/{deck_id:int}/pages/{name}/thumbnail")
async def page_thumbnail(
    request: Request, principal: Caller, deck_id: RowId, name: str
) -> Response:
    """The current version's screenshot of a page (PNG, JPEG or WebP); `ETag` is its SHA-256."""
    service = deck_service(request)
    deck = await service.deck(principal.workspace_id, deck_id)
    current = next((p for p in deck.pages if p.page_name == name), None) if deck else None
    shot = current.screenshot if current is not None else None
    if not isinstance(shot, dict) or not isinstance(shot.get("artifact_key"), str):
        raise ApiError(404, "NOT_FOUND", f"deck {deck_id} has no screenshot of page {name!r}")
    data = await service.render.store.get(shot["artifact_key"])
    if data is None:
        raise ApiError(404, "NOT_FOUND", f"the screenshot of page {name!r} is gone")
    return Response(
        data,
        media_type=str(shot.get("content_type") or "image/png"),
        headers={"ETag": f'"{shot.get("sha256", "")}"', "Cache-Control": "private, no-cache"},
    )
