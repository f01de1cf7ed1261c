"""Hosted-site management routes: the live site, its publications, unpublish, visibility, and
share links (create, list, revoke).

A deck goes online by `POST /v1/decks/{id}/publish` (in `api/decks.py`); the files are served
under `/sites/{workspace}/{deck}/` by `api/site_files.py`. Every route here is scoped to the
caller's workspace; share links need an admin or editor token.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from deckyard.api.auth import Principal, TokenRole, current_principal
from deckyard.api.decks import deck_service, owned_deck
from deckyard.api.errors import ApiError
from deckyard.api.params import RowId
from deckyard.decks.site.hosting import SiteCode, Visibility
from deckyard.decks.sites import ShareLink, SiteService, site_url
from deckyard.decks.store_sites import PublicationRow

router = APIRouter(prefix="/v1/decks", tags=["sites"])
Caller = Annotated[Principal, Depends(current_principal)]
VisibilityName = Literal["public", "private"]
NOT_PUBLISHED: dict[int | str, dict[str, Any]] = {
    404: {"description": "`SITE_NOT_FOUND`: the deck has no live site."}
}


async def editor_principal(request: Request) -> Principal:
    """FastAPI dependency: an admin or editor token (share links are handed to outsiders)."""
    principal = await current_principal(request)
    if principal.role not in (TokenRole.ADMIN, TokenRole.EDITOR):
        raise ApiError(
            403,
            "ROLE_FORBIDDEN",
            f"share links need an admin or editor token, not {principal.role}",
        )
    return principal


Editor = Annotated[Principal, Depends(editor_principal)]


def sites_of(request: Request) -> SiteService:
    """The app's hosted-site service."""
    sites: SiteService = deck_service(request).sites
    return sites


class PublicationOut(BaseModel):
    """One publication of a deck's site."""

    id: int
    deck_id: int
    status: str = Field(description="`staged`, `live`, `superseded` or `unpublished`.")
    visibility: VisibilityName
    deck_version: int
    site_version: str
    task_id: int | None
    files: int = Field(description="How many files the site has.")
    size: int = Field(description="Their total size in bytes.")
    actor_token_id: int | None
    created_at: datetime
    live_at: datetime | None
    ended_at: datetime | None
    files_deleted: bool = Field(description="Whether retention deleted its files already.")

    @classmethod
    def of(cls, p: PublicationRow) -> PublicationOut:
        """The API view of a publication."""
        return cls(
            id=p.id,
            deck_id=p.deck_id,
            status=p.status,
            visibility=Visibility(p.visibility).value,
            deck_version=p.deck_version,
            site_version=p.site_version,
            task_id=p.task_id,
            files=len(p.files),
            size=sum(int(f.get("size", 0)) for f in p.files),
            actor_token_id=p.actor_token_id,
            created_at=p.created_at,
            live_at=p.live_at,
            ended_at=p.ended_at,
            files_deleted=p.files_deleted_at is not None,
        )


class SiteOut(PublicationOut):
    """The deck's live site: its publication and where it is served."""

    url: str = Field(description="Path of the site on this server (public sites only).")


class VisibilityIn(BaseModel):
    """A visibility change of the live site."""

    model_config = ConfigDict(extra="forbid")

    visibility: VisibilityName


class ShareLinkIn(BaseModel):
    """A new share link."""

    model_config = ConfigDict(extra="forbid")

    expires_in_seconds: int | None = Field(
        None,
        ge=60,
        description="Lifetime in seconds (at least 60, at most the server's "
        "`DECKYARD_SITE_SHARE_MAX_SECONDS`); default `DECKYARD_SITE_SHARE_DEFAULT_SECONDS`.",
    )
    label: str | None = Field(None, max_length=200, description="A note for whom it is.")


class ShareLinkOut(BaseModel):
    """A share link: open `url` (relative to this server) to read the deck's site."""

    id: int
    deck_id: int
    label: str | None
    url: str
    token: str
    expires_at: datetime
    created_at: datetime
    created_by_token_id: int | None
    revoked_at: datetime | None
    active: bool = Field(description="Neither revoked nor expired.")

    @classmethod
    def of(cls, link: ShareLink, now: datetime) -> ShareLinkOut:
        """The API view of a share link."""
        r = link.row
        return cls(
            id=r.id,
            deck_id=r.deck_id,
            label=r.label,
            url=link.url,
            token=link.token,
            expires_at=r.expires_at,
            created_at=r.created_at,
            created_by_token_id=r.created_by_token_id,
            revoked_at=r.revoked_at,
            active=r.revoked_at is None and r.expires_at > now,
        )


def site_out(p: PublicationRow) -> SiteOut:
    """The live site's view."""
    return SiteOut(**PublicationOut.of(p).model_dump(), url=site_url(p.workspace_id, p.deck_id))


async def live_site(request: Request, principal: Principal, deck_id: int) -> PublicationRow:
    """The deck's live publication; 404 when the deck is not the caller's or not published."""
    await owned_deck(request, principal, deck_id)
    live = await sites_of(request).live(principal.workspace_id, deck_id)
    if live is None:
        raise ApiError(404, SiteCode.SITE_NOT_FOUND, f"deck {deck_id} has no published site")
    return live


@router.get("/{deck_id:int}/site", response_model=SiteOut, responses=NOT_PUBLISHED)
async def get_site(request: Request, principal: Caller, deck_id: RowId) -> SiteOut:
    """The deck's live site: which publication is served, its visibility and URL."""
    return site_out(await live_site(request, principal, deck_id))


@router.patch("/{deck_id:int}/site", response_model=SiteOut, responses=NOT_PUBLISHED)
async def set_site_visibility(
    request: Request, principal: Caller, deck_id: RowId, body: VisibilityIn
) -> SiteOut:
    """Make the live site public or private without publishing again."""
    await live_site(request, principal, deck_id)
    changed = await sites_of(request).set_visibility(
        principal.workspace_id, deck_id, Visibility(body.visibility)
    )
    if changed is None:
        raise ApiError(404, SiteCode.SITE_NOT_FOUND, f"deck {deck_id} has no published site")
    return site_out(changed)


@router.delete("/{deck_id:int}/site", status_code=204, responses=NOT_PUBLISHED)
async def unpublish(request: Request, principal: Caller, deck_id: RowId) -> Response:
    """Take the site down: `/sites/...` answers 404 from now on. Its files stay until
    retention deletes them; publishing again puts a new publication up."""
    await owned_deck(request, principal, deck_id)
    if await sites_of(request).unpublish(principal.workspace_id, deck_id) is None:
        raise ApiError(404, SiteCode.SITE_NOT_FOUND, f"deck {deck_id} has no published site")
    return Response(status_code=204)


@router.get("/{deck_id:int}/publications", response_model=list[PublicationOut])
async def list_publications(
    request: Request,
    principal: Caller,
    deck_id: RowId,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[PublicationOut]:
    """The deck's publications, newest first: live, superseded, unpublished and staged ones."""
    await owned_deck(request, principal, deck_id)
    return [PublicationOut.of(p) for p in await sites_of(request).publications(deck_id, limit)]


@router.post("/{deck_id:int}/share-links", status_code=201, response_model=ShareLinkOut)
async def create_share_link(
    request: Request, principal: Editor, deck_id: RowId, body: ShareLinkIn | None = None
) -> JSONResponse:
    """A signed, expiring link to the deck's site that works while the site is private.

    The link keeps working across publishes until it expires or is revoked.
    """
    await owned_deck(request, principal, deck_id)
    settings = deck_service(request).settings
    given = body or ShareLinkIn()
    seconds = given.expires_in_seconds or settings.site_share_default_seconds
    if seconds > settings.site_share_max_seconds:
        raise ApiError(
            422,
            "INVALID_INPUT",
            f"expires_in_seconds: at most {settings.site_share_max_seconds} on this server",
            field="expires_in_seconds",
        )
    sites = sites_of(request)
    link = await sites.share_link_create(
        principal.workspace_id, deck_id, seconds, given.label, principal.token_id
    )
    return JSONResponse(
        ShareLinkOut.of(link, sites.clock.now()).model_dump(mode="json"),
        status_code=201,
        headers={"Location": f"/v1/decks/{deck_id}/share-links/{link.row.id}"},
    )


@router.get("/{deck_id:int}/share-links", response_model=list[ShareLinkOut])
async def list_share_links(
    request: Request, principal: Editor, deck_id: RowId
) -> list[ShareLinkOut]:
    """The deck's share links, newest first, revoked and expired ones included."""
    await owned_deck(request, principal, deck_id)
    sites = sites_of(request)
    now = sites.clock.now()
    return [ShareLinkOut.of(link, now) for link in await sites.share_links(deck_id)]


@router.delete(
    "/{deck_id:int}/share-links/{link_id:int}",
    status_code=204,
    responses={404: {"description": "`SHARE_LINK_NOT_FOUND`"}},
)
async def revoke_share_link(
    request: Request, principal: Editor, deck_id: RowId, link_id: RowId
) -> Response:
    """Revoke a share link: its next request answers 403 `SHARE_LINK_REVOKED`."""
    await owned_deck(request, principal, deck_id)
    if not await sites_of(request).share_link_revoke(deck_id, link_id):
        raise ApiError(
            404, SiteCode.SHARE_LINK_NOT_FOUND, f"deck {deck_id} has no share link {link_id}"
        )
    return Response(status_code=204)
