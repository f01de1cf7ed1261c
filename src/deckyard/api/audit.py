"""The audit log: every write a token made (method, path, status, where it led), newest first.

`AuditMiddleware` records a row for each non-read request that an authenticated token made,
whatever its answer; reads and unauthenticated requests write nothing, so an idle server
writes nothing either. `Location` (a job, a task, a new deck) links the write to what it made.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deckyard.api.auth import SAFE_METHODS, Principal, current_principal
from deckyard.api.errors import first_line
from deckyard.api.params import BeforeId
from deckyard.clock import SYSTEM_CLOCK
from deckyard.db import Database, is_connection_lost, is_storage_full
from deckyard.workspaces import store

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/audit", tags=["audit"])


class AuditEvent(BaseModel):
    """One write: who (token id and role), what (method, path), its status and result."""

    id: int
    token_id: int
    role: str
    method: str
    path: str
    status: int
    location: str | None
    created_at: datetime


class AuditPage(BaseModel):
    """A page of the audit log, newest first; pass `next_before` as `before` for the next."""

    events: list[AuditEvent]
    next_before: int | None


async def audit_insert(
    db: Database, principal: Principal, scope: Scope, status: int, location: str | None
) -> None:
    """Record one write of `principal`."""
    row = {
        "workspace_id": principal.workspace_id,
        "token_id": principal.token_id,
        "role": str(principal.role),
        "method": scope["method"],
        "path": str(scope.get("path", ""))[:1000],
        "status": status,
        "location": location[:1000] if location else None,
        "created_at": SYSTEM_CLOCK.now(),
    }
    await db.write(lambda conn: store.audit_event_insert(conn, row))


class AuditMiddleware:
    """Records every authenticated write in `audit_events` just before its answer starts."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                await self._record(scope, message)
            await send(message)

        await self.app(scope, receive, watch)

    @staticmethod
    async def _record(scope: Scope, start: Message) -> None:
        """Record the write before its answer goes out, so a client that saw the answer
        finds it in the log (and the log's order is the order the answers were given)."""
        principal = scope.get("state", {}).get("principal")
        if not isinstance(principal, Principal):
            return
        location = next(
            (v.decode("latin-1") for k, v in start.get("headers", []) if k.lower() == b"location"),
            None,
        )
        try:
            await audit_insert(
                scope["app"].state.db, principal, scope, int(start["status"]), location
            )
        except Exception as exc:
            # A lost database or a full disk is the cause itself: one line, not a traceback.
            known = is_connection_lost(exc) or is_storage_full(exc)
            log.warning(
                "audit: could not record %s %s: %s",
                scope["method"],
                scope.get("path"),
                first_line(exc),
                exc_info=not known,
            )


@router.get("", response_model=AuditPage)
async def list_audit(
    request: Request,
    principal: Annotated[Principal, Depends(current_principal)],
    before: BeforeId = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> AuditPage:
    """The workspace's writes, newest first, `limit` at a time (page on with `before`)."""
    async with request.app.state.db.read_connection() as conn:
        rows = await store.audit_event_page(conn, principal.workspace_id, before, limit + 1)
    events = [AuditEvent.model_validate(r._asdict()) for r in rows[:limit]]
    return AuditPage(events=events, next_before=events[-1].id if len(rows) > limit else None)
