"""Every statement on the workspace tables: workspaces and their settings, API tokens, stored
idempotent responses and the audit log (noun-first names: `workspace_*`, `token_*`,
`idempotency_*`, `audit_*`).

Functions take the caller's connection (and the `Database` where the statement differs by
dialect); the API runs the writes in `Database.write`, so each must touch nothing but that
connection. Reads of one workspace's rows carry its id in the `WHERE` clause.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, null, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db import Database
from deckyard.workspaces.schema import api_tokens, audit_events, idempotency_keys, workspaces

T = api_tokens
K = idempotency_keys

# --- workspaces ---------------------------------------------------------------------------------


async def workspace_ensure(
    db: Database, conn: AsyncConnection, workspace_id: str, now: datetime
) -> None:
    """Create the workspace (named after its id) unless it exists."""
    await conn.execute(
        db.insert_ignoring_conflicts(workspaces, index_elements=["id"]).values(
            id=workspace_id, name=workspace_id, created_at=now
        )
    )


async def workspace_settings_read(conn: AsyncConnection, workspace_id: str) -> Any:
    """The workspace's stored settings object; None when it has none, or no row."""
    return (
        await conn.execute(select(workspaces.c.settings).where(workspaces.c.id == workspace_id))
    ).scalar_one_or_none()


async def workspace_settings_update(
    conn: AsyncConnection, workspace_id: str, changes: dict[str, Any]
) -> dict[str, Any]:
    """Apply `changes` to the stored settings as a JSON merge patch (a None removes the key);
    the settings after it (an empty object is stored as null).

    The row is locked while it is read and written back, so two changes to different keys
    both stay. Raises `LookupError` when the workspace has no row.
    """
    found = (
        await conn.execute(
            select(workspaces.c.settings).where(workspaces.c.id == workspace_id).with_for_update()
        )
    ).first()
    if found is None:
        raise LookupError(workspace_id)
    merged = {k: v for k, v in {**(found.settings or {}), **changes}.items() if v is not None}
    await conn.execute(
        update(workspaces).where(workspaces.c.id == workspace_id).values(settings=merged or null())
    )
    return merged


# --- API tokens -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenRow:
    """A token as listed: never its secret, which is only shown when it is created."""

    id: int
    role: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None


async def token_insert(
    conn: AsyncConnection,
    workspace_id: str,
    token_hash: str,
    *,
    label: str | None,
    role: str,
    now: datetime,
) -> None:
    """Store a new token of the workspace by its hash."""
    await conn.execute(
        insert(T).values(
            workspace_id=workspace_id, token_hash=token_hash, label=label, role=role, created_at=now
        )
    )


async def token_active(conn: AsyncConnection, token_hash: str) -> Row[Any] | None:
    """`id`, `workspace_id` and `role` of the unrevoked token with that hash, if any."""
    return (
        await conn.execute(
            select(T.c.id, T.c.workspace_id, T.c.role).where(
                T.c.token_hash == token_hash, T.c.revoked_at.is_(None)
            )
        )
    ).first()


async def token_rows(conn: AsyncConnection, workspace_id: str) -> list[TokenRow]:
    """The workspace's tokens, newest first, revoked ones included."""
    rows = await conn.execute(
        select(T.c.id, T.c.role, T.c.label, T.c.created_at, T.c.revoked_at)
        .where(T.c.workspace_id == workspace_id)
        .order_by(T.c.id.desc())
    )
    return [TokenRow(**r._asdict()) for r in rows]


async def token_mark_revoked(
    conn: AsyncConnection, workspace_id: str, token_id: int, now: datetime
) -> bool:
    """Revoke a token of the workspace from `now`; False when it has no such token.

    A token revoked already keeps its first revocation time.
    """
    found = (
        await conn.execute(
            select(T.c.revoked_at).where(T.c.id == token_id, T.c.workspace_id == workspace_id)
        )
    ).first()
    if found is None:
        return False
    if found.revoked_at is None:
        await conn.execute(
            update(T).where(T.c.id == token_id, T.c.revoked_at.is_(None)).values(revoked_at=now)
        )
    return True


# --- idempotency keys ---------------------------------------------------------------------------


async def idempotency_reserve(
    db: Database,
    conn: AsyncConnection,
    workspace_id: str,
    key: str,
    request_hash: str,
    now: datetime,
) -> Row[Any] | None:
    """Take the key for a request with `request_hash`: None when it is ours now, else the row
    of the request that holds it (`status_code` null while that one still runs)."""
    inserted = (
        await conn.execute(
            db.insert_ignoring_conflicts(K, index_elements=["workspace_id", "key"])
            .values(workspace_id=workspace_id, key=key, request_hash=request_hash, created_at=now)
            .returning(K.c.key)
        )
    ).first()
    if inserted is not None:
        return None
    return (
        await conn.execute(select(K).where(K.c.workspace_id == workspace_id, K.c.key == key))
    ).one()


async def idempotency_record(
    conn: AsyncConnection,
    workspace_id: str,
    key: str,
    *,
    status_code: int,
    headers: dict[str, str],
    body: bytes,
) -> None:
    """Keep the response of the request that holds the key, for its repeats."""
    await conn.execute(
        update(K)
        .where(K.c.workspace_id == workspace_id, K.c.key == key)
        .values(status_code=status_code, response_headers=headers, response_body=body)
    )


async def idempotency_forget(conn: AsyncConnection, workspace_id: str, key: str) -> None:
    """Give the key up: the next request with it runs anew."""
    await conn.execute(delete(K).where(K.c.workspace_id == workspace_id, K.c.key == key))


async def idempotency_expired(
    conn: AsyncConnection, cutoff: datetime, limit: int
) -> list[tuple[str, str]]:
    """Up to `limit` (workspace, key) pairs stored before `cutoff` (read only)."""
    rows = await conn.execute(
        select(K.c.workspace_id, K.c.key).where(K.c.created_at < cutoff).limit(limit)
    )
    return [(row.workspace_id, row.key) for row in rows]


async def idempotency_delete_expired(
    conn: AsyncConnection, keys: Sequence[tuple[str, str]], cutoff: datetime
) -> None:
    """Delete these keys, each only while it is still older than `cutoff`."""
    for workspace_id, key in keys:
        await conn.execute(
            delete(K).where(
                K.c.workspace_id == workspace_id, K.c.key == key, K.c.created_at < cutoff
            )
        )


# --- the audit log --------------------------------------------------------------------------------


async def audit_event_insert(conn: AsyncConnection, values: dict[str, Any]) -> None:
    """Append one event to the audit log."""
    await conn.execute(insert(audit_events).values(**values))


async def audit_event_page(
    conn: AsyncConnection, workspace_id: str, before: int | None, limit: int
) -> list[Row[Any]]:
    """Up to `limit` events of the workspace, newest first, older than event `before` if set."""
    c = audit_events.c
    query = select(audit_events).where(c.workspace_id == workspace_id)
    if before is not None:
        query = query.where(c.id < before)
    return list(await conn.execute(query.order_by(c.id.desc()).limit(limit)))
