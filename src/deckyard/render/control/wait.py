"""Waiting for a render request to end: woken by its state change, never by a fast poll."""

from __future__ import annotations

import asyncio

from deckyard.db import Database
from deckyard.render.control.models import RenderRequest
from deckyard.render.control.status import WAKE_REQUESTS
from deckyard.render.control.store import request_get


class RequestNotFound(LookupError):
    """No render request has that id."""


async def wait_for_terminal(
    db: Database, request_id: int, timeout: float | None, recheck_seconds: float
) -> RenderRequest:
    """Return the request once it is terminal; reads only, never writes.

    Every request state change wakes `WAKE_REQUESTS` at commit (in process, and through NOTIFY
    on PostgreSQL); `recheck_seconds` only bounds how long a missed wakeup could delay us.
    """
    sub = db.bus.subscribe(WAKE_REQUESTS)
    try:
        async with asyncio.timeout(timeout):
            while True:
                async with db.read_connection() as conn:
                    request = await request_get(conn, request_id)
                if request is None:
                    raise RequestNotFound(request_id)
                if request.is_terminal:
                    return request
                await sub.wait(recheck_seconds)
    finally:
        sub.close()
