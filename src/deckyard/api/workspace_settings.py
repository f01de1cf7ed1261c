"""A workspace's own settings: one JSON object on its row; a setting it leaves unset (null)
follows the server's.

The only setting so far is `fetch_remote`: whether the server downloads the images, fonts and
stylesheets a deck refers to by URL when it is uploaded or validated. Null follows the server's
`deck_fetch_remote` (on by default). Keys this version does not know (written by a newer one)
are kept through a change and ignored when read.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from deckyard.config import Settings
from deckyard.db import Database
from deckyard.workspaces.store import workspace_settings_read, workspace_settings_update


class WorkspaceSettings(BaseModel):
    """A workspace's own settings; null is unset (the server's setting applies)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"fetch_remote": False}]}
    )

    fetch_remote: bool | None = Field(
        None,
        strict=True,
        description="Download the files a deck refers to by URL when it is uploaded or "
        "validated (through the SSRF guard); false refuses them (`COMPILE_EXTERNAL_REFERENCE`). "
        "Null follows the server's `deck_fetch_remote` (on by default).",
    )


class EffectiveSettings(BaseModel):
    """What applies to the workspace: its own setting, else the server's."""

    fetch_remote: bool


def effective_settings(own: WorkspaceSettings, settings: Settings) -> EffectiveSettings:
    """The workspace's settings with every unset one taken from the server's `settings`."""
    fetch = own.fetch_remote
    return EffectiveSettings(fetch_remote=settings.deck_fetch_remote if fetch is None else fetch)


def _known(stored: dict[str, Any] | None) -> WorkspaceSettings:
    fields = WorkspaceSettings.model_fields
    return WorkspaceSettings(**{k: v for k, v in (stored or {}).items() if k in fields})


async def workspace_settings_get(db: Database, workspace_id: str) -> WorkspaceSettings:
    """The workspace's own settings (all unset when it has none, or no row)."""
    async with db.read_connection() as conn:
        stored = await workspace_settings_read(conn, workspace_id)
    return _known(stored)


async def workspace_settings_merge(
    db: Database, workspace_id: str, changes: dict[str, Any]
) -> WorkspaceSettings:
    """Apply `changes` as a JSON merge patch (a null unsets); the settings after it.

    The row is locked while it is read and written back, so two changes to different keys
    both stay. Raises `LookupError` when the workspace has no row.
    """
    merged = await db.write(lambda conn: workspace_settings_update(conn, workspace_id, changes))
    return _known(merged)


async def fetch_remote_for(db: Database, workspace_id: str, settings: Settings) -> bool:
    """Whether the server fetches a deck's remote files for `workspace_id`."""
    own = await workspace_settings_get(db, workspace_id)
    return effective_settings(own, settings).fetch_remote
