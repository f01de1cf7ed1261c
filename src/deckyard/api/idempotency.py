"""`Idempotency-Key` on every POST: a repeat returns the first response; a different body is 422.

The key is scoped to the caller's workspace. The first request inserts a placeholder row before
it runs, so a concurrent repeat gets 409 (retry shortly) instead of running twice. Responses
with status 5xx are not kept: the client may retry them with the same key.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deckyard.api.auth import bearer_token, token_resolve
from deckyard.api.errors import error_body
from deckyard.clock import SYSTEM_CLOCK
from deckyard.db import Database
from deckyard.workspaces.store import (
    idempotency_forget,
    idempotency_record,
    idempotency_reserve,
)

MAX_KEY_LENGTH = 200
KEPT_HEADERS = ("content-type", "location", "retry-after")


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[Any]) -> None:
    raw = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": raw})


class IdempotencyMiddleware:
    """Stores and replays POST responses keyed by workspace and `Idempotency-Key`."""

    def __init__(self, app: ASGIApp, max_body_size: int) -> None:
        self.app = app
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        key = request.headers.get("idempotency-key")
        token = bearer_token(request)
        if key is None or token is None or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        if not key or len(key) > MAX_KEY_LENGTH:
            refusal = error_body(
                "INVALID_INPUT",
                f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters",
                "Idempotency-Key",
            )
            await _send_json(send, 422, refusal, [])
            return
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
            if size > self.max_body_size:
                break
        replay = iter(messages)

        async def replayed() -> Message:
            try:
                return next(replay)
            except StopIteration:
                return await receive()

        db: Database = scope["app"].state.db
        principal = await token_resolve(db, token)
        if principal is None or size > self.max_body_size:
            await self.app(scope, replayed, send)
            return
        body_bytes = b"".join(m.get("body", b"") for m in messages)
        digest = hashlib.sha256(
            b"\0".join([scope["path"].encode(), scope.get("query_string", b""), body_bytes])
        ).hexdigest()
        ws = principal.workspace_id
        existing = await db.write(
            lambda conn: idempotency_reserve(db, conn, ws, key, digest, SYSTEM_CLOCK.now())
        )
        if existing is not None:
            await self._answer_existing(existing, digest, send)
            return

        captured: list[Message] = []

        async def capture(message: Message) -> None:
            captured.append(message)

        try:
            await self.app(scope, replayed, capture)
        except BaseException:
            await db.write(lambda conn: idempotency_forget(conn, ws, key))
            raise
        start = next(m for m in captured if m["type"] == "http.response.start")
        status = int(start["status"])
        body = b"".join(m.get("body", b"") for m in captured if m["type"] == "http.response.body")
        headers = {
            k.decode().lower(): v.decode()
            for k, v in start.get("headers", [])
            if k.decode().lower() in KEPT_HEADERS
        }
        if status >= 500:
            await db.write(lambda conn: idempotency_forget(conn, ws, key))
        else:
            await db.write(
                lambda conn: idempotency_record(
                    conn, ws, key, status_code=status, headers=headers, body=body
                )
            )
        for message in captured:
            await send(message)

    async def _answer_existing(self, row: Any, digest: str, send: Send) -> None:
        if row.request_hash != digest:
            body = error_body(
                "IDEMPOTENCY_KEY_REUSED",
                "this Idempotency-Key was used with a different request body",
                "Idempotency-Key",
            )
            await _send_json(send, 422, body, [])
            return
        if row.status_code is None:
            body = error_body(
                "IDEMPOTENCY_IN_PROGRESS", "the first request with this key is still running"
            )
            await _send_json(send, 409, body, [(b"retry-after", b"1")])
            return
        headers = [(k.encode(), str(v).encode()) for k, v in (row.response_headers or {}).items()]
        headers.append((b"idempotent-replayed", b"true"))
        await send({"type": "http.response.start", "status": row.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": row.response_body or b""})
