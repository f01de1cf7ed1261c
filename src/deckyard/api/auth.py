"""Workspaces and bearer tokens: tokens are random, shown once, and stored only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from urllib.parse import urlsplit

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.api.errors import ApiError
from deckyard.db import Database
from deckyard.jobs import current_actor
from deckyard.workspaces import store

TOKEN_PREFIX = "dy_"
SESSION_COOKIE = "deckyard_session"
CSRF_HEADER = "x-deckyard-csrf"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WORKSPACE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class TokenRole(StrEnum):
    """What a token may do in its workspace.

    `admin` everything, tokens included; `editor` read and write decks, jobs and tasks;
    `viewer` only read; `worker` only claim and finish queue jobs.
    """

    ADMIN = "admin"
    EDITOR = "editor"
    VIEWER = "viewer"
    WORKER = "worker"


PEOPLE = frozenset({TokenRole.ADMIN, TokenRole.EDITOR, TokenRole.VIEWER})


@dataclass(frozen=True)
class Principal:
    """Who is calling: the workspace a token belongs to, and the token's role."""

    workspace_id: str
    token_id: int
    role: TokenRole = TokenRole.ADMIN


def hash_token(token: str) -> str:
    """The stored form of a token (tokens are 256-bit random, so a plain SHA-256 suffices)."""
    return hashlib.sha256(token.encode()).hexdigest()


async def token_create(
    db: Database,
    workspace_id: str,
    now: datetime,
    label: str = "",
    role: TokenRole = TokenRole.ADMIN,
) -> str:
    """Create a token for `workspace_id` (creating the workspace if needed); returns the token."""
    if not WORKSPACE_RE.match(workspace_id):
        raise ValueError(
            "workspace names use lowercase letters, digits, '-' and '_' (max 64 characters)"
        )
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)

    async def create(conn: AsyncConnection) -> None:
        await store.workspace_ensure(db, conn, workspace_id, now)
        await store.token_insert(
            conn, workspace_id, hash_token(token), label=label or None, role=role.value, now=now
        )

    await db.write(create)
    return token


async def token_resolve(db: Database, token: str) -> Principal | None:
    """The principal for a token, or None when it is unknown or revoked."""
    async with db.read_connection() as conn:
        row = await store.token_active(conn, hash_token(token))
    return Principal(row.workspace_id, row.id, TokenRole(row.role)) if row else None


async def token_list(db: Database, workspace_id: str) -> list[store.TokenRow]:
    """The workspace's tokens, newest first, revoked ones included."""
    async with db.read_connection() as conn:
        return await store.token_rows(conn, workspace_id)


async def token_revoke(db: Database, workspace_id: str, token_id: int, now: datetime) -> bool:
    """Revoke a token of the workspace; its next request answers 401. False when not found.

    Revoking a revoked token keeps its first revocation time and is not an error.
    """
    return await db.write(lambda conn: store.token_mark_revoked(conn, workspace_id, token_id, now))


def bearer_token(request: Request) -> str | None:
    """The bearer token of a request, if it carries one."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def session_token(request: Request) -> str | None:
    """The token of the dashboard's session cookie, if the request carries one."""
    return request.cookies.get(SESSION_COOKIE) or None


def csrf_token(session: str) -> str:
    """The anti-forgery token of a dashboard session: an HMAC of the session's own secret.

    The dashboard's pages carry it and its scripts send it as `X-Deckyard-CSRF`; nothing
    without the HttpOnly cookie's value can compute it, so neither another site nor a document
    that runs in a sandboxed (opaque) origin on this host can forge a state change.
    """
    return hmac.new(session.encode(), b"deckyard-dashboard-csrf", hashlib.sha256).hexdigest()


def cookie_write_refusal(request: Request, session: str) -> ApiError | None:
    """Why a cookie-authenticated state change is refused, or None when it may go ahead.

    It must come from this origin as the browser tells it (`Origin`, `Sec-Fetch-Site`: headers
    no script can set; a sandboxed document's requests say `null` / `cross-site`) and carry
    the session's CSRF token.
    """
    if not same_origin(request):
        return ApiError(
            403, "CROSS_SITE", f"a cookie-authenticated {request.method} must come from this site"
        )
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), csrf_token(session).encode()):
        return ApiError(
            403,
            "CSRF_TOKEN_REQUIRED",
            f"a cookie-authenticated {request.method} needs the dashboard's {CSRF_HEADER} token",
        )
    return None


def same_origin(request: Request) -> bool:
    """False when the browser says the request came from another site or an opaque origin.

    `Origin` and `Sec-Fetch-Site` are set by the browser, never by a page's script; a request
    without either (curl, an old browser) is judged by its other credentials alone.
    """
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        return False
    return request.headers.get("sec-fetch-site") in (None, "same-origin", "none")


async def any_principal(request: Request) -> Principal:
    """The caller's principal whatever its role, from a bearer token or the dashboard cookie.

    A bearer token wins when both are sent. The cookie exists because a browser's EventSource
    cannot send headers; a cookie-authenticated request that changes state must come from this
    origin and carry the session's CSRF token (`cookie_write_refusal`).
    """
    cached: Principal | None = getattr(request.state, "principal", None)
    if cached is not None:
        current_actor.set(cached.token_id)
        return cached
    token = bearer_token(request)
    if token is None:
        token = session_token(request)
        if token is None:
            raise ApiError(401, "UNAUTHENTICATED", "send 'Authorization: Bearer <token>'")
        if request.method not in SAFE_METHODS:
            refusal = cookie_write_refusal(request, token)
            if refusal is not None:
                raise refusal
    principal = await token_resolve(request.app.state.db, token)
    if principal is None:
        raise ApiError(401, "UNAUTHENTICATED", "unknown or revoked token")
    request.state.principal = principal
    current_actor.set(principal.token_id)  # the jobs and tasks this request starts are its
    return principal


async def current_principal(request: Request) -> Principal:
    """FastAPI dependency: the caller's principal, a person's token (admin, editor, viewer).

    A `viewer` may only read (GET, HEAD); a `worker` token may only work queues
    (`queue_principal`); anything else they try is 403 `ROLE_FORBIDDEN`.
    """
    principal = await any_principal(request)
    if principal.role not in PEOPLE:
        raise ApiError(
            403, "ROLE_FORBIDDEN", f"a {principal.role} token may only claim and finish queue jobs"
        )
    if principal.role is TokenRole.VIEWER and request.method not in SAFE_METHODS:
        raise ApiError(403, "ROLE_FORBIDDEN", "a viewer token can only read")
    return principal


async def admin_principal(request: Request) -> Principal:
    """FastAPI dependency: the caller's principal, which must be an `admin` token."""
    principal = await any_principal(request)
    if principal.role is not TokenRole.ADMIN:
        raise ApiError(
            403, "ROLE_FORBIDDEN", f"managing tokens needs an admin token, not {principal.role}"
        )
    return principal


async def queue_principal(request: Request) -> Principal:
    """FastAPI dependency for the external-worker routes: a `member` or `worker` token."""
    return await any_principal(request)
