"""Workspace routes: the caller's workspace settings, read by any person's token, changed by an
admin's (a JSON merge patch: a key sent as null is unset and follows the server again)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import BaseModel

from deckyard.api.auth import Principal, TokenRole, any_principal, current_principal
from deckyard.api.errors import ApiError
from deckyard.api.workspace_settings import (
    EffectiveSettings,
    WorkspaceSettings,
    effective_settings,
    workspace_settings_get,
    workspace_settings_merge,
)
from deckyard.config import Settings

router = APIRouter(prefix="/v1/workspace", tags=["workspace"])
Caller = Annotated[Principal, Depends(current_principal)]
MERGE_PATCH = {
    "requestBody": {
        "content": {
            "application/merge-patch+json": {
                "schema": {"$ref": "#/components/schemas/WorkspaceSettings"}
            }
        }
    }
}


async def settings_admin(request: Request) -> Principal:
    """FastAPI dependency: the caller's principal, which must be an `admin` token."""
    principal = await any_principal(request)
    if principal.role is not TokenRole.ADMIN:
        raise ApiError(
            403,
            "ROLE_FORBIDDEN",
            f"changing workspace settings needs an admin token, not {principal.role}",
        )
    return principal


Admin = Annotated[Principal, Depends(settings_admin)]


class WorkspaceSettingsOut(BaseModel):
    """The workspace's own settings (null: unset) and, under `effective`, what applies."""

    fetch_remote: bool | None
    effective: EffectiveSettings


def _answer(request: Request, own: WorkspaceSettings) -> WorkspaceSettingsOut:
    settings: Settings = request.app.state.settings
    return WorkspaceSettingsOut(**own.model_dump(), effective=effective_settings(own, settings))


@router.get("/settings", response_model=WorkspaceSettingsOut)
async def get_settings(request: Request, principal: Caller) -> WorkspaceSettingsOut:
    """The workspace's settings, and the values that apply (unset ones are the server's)."""
    return _answer(
        request, await workspace_settings_get(request.app.state.db, principal.workspace_id)
    )


@router.patch("/settings", response_model=WorkspaceSettingsOut, openapi_extra=MERGE_PATCH)
async def patch_settings(
    request: Request, principal: Admin, body: Annotated[WorkspaceSettings, Body()]
) -> WorkspaceSettingsOut:
    """Change the workspace's settings: keys sent are set, null unsets one, others are kept."""
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    # A token's workspace always has a row (tokens are deleted with it): a `LookupError` is a bug.
    own = await workspace_settings_merge(request.app.state.db, principal.workspace_id, changes)
    return _answer(request, own)
