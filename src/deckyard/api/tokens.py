"""Token routes (admin tokens only): create with a role, list, revoke.

`deckyard token create|list|revoke --server URL --token ADMIN_TOKEN` goes through these, which
is how tokens are managed while a Lite server owns the database file.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from deckyard.api.auth import (
    Principal,
    TokenRole,
    admin_principal,
    token_create,
    token_list,
    token_resolve,
    token_revoke,
)
from deckyard.api.errors import ApiError
from deckyard.api.params import RowId
from deckyard.clock import SYSTEM_CLOCK

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])
Admin = Annotated[Principal, Depends(admin_principal)]


class TokenCreate(BaseModel):
    """A new token's role and label."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"role": "editor", "label": "ci"}]}
    )

    role: TokenRole = TokenRole.EDITOR
    label: str = Field("", max_length=200)


class TokenOut(BaseModel):
    """A token as listed (never its secret)."""

    id: int
    role: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None


class TokenCreated(TokenOut):
    """A created token: `token` is shown this once and stored only as a hash."""

    token: str
    workspace: str


@router.post("", status_code=201, response_model=TokenCreated)
async def create_token(
    request: Request, principal: Admin, body: Annotated[TokenCreate, Body()]
) -> TokenCreated:
    """Create a token in the caller's workspace; the secret is in this answer only."""
    db = request.app.state.db
    secret = await token_create(
        db, principal.workspace_id, SYSTEM_CLOCK.now(), body.label, body.role
    )
    made = await token_resolve(db, secret)
    row = next(
        r for r in await token_list(db, principal.workspace_id) if made and r.id == made.token_id
    )
    return TokenCreated(**row.__dict__, token=secret, workspace=principal.workspace_id)


@router.get("", response_model=list[TokenOut])
async def list_tokens(request: Request, principal: Admin) -> list[TokenOut]:
    """The workspace's tokens, newest first (revoked ones with `revoked_at`)."""
    rows = await token_list(request.app.state.db, principal.workspace_id)
    return [TokenOut(**r.__dict__) for r in rows]


@router.delete("/{token_id:int}", status_code=204)
async def revoke_token(request: Request, principal: Admin, token_id: RowId) -> Response:
    """Revoke a token: its next request answers 401."""
    if not await token_revoke(
        request.app.state.db, principal.workspace_id, token_id, SYSTEM_CLOCK.now()
    ):
        raise ApiError(404, "NOT_FOUND", f"no token {token_id} in this workspace")
    return Response(status_code=204)
