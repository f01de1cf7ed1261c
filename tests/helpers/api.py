"""Driving the ASGI app in process, lifespan included."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI

from deckyard.api.app import create_app
from deckyard.api.auth import token_create
from deckyard.clock import SYSTEM_CLOCK
from tests.helpers.runtime import fast_settings

# With a real renderer or a fake model the process shares two busy cores with Chromium or another
# worker's tests: a 1.5 s lease (the fast default) expires whenever the machine stalls the event
# loop for a second, the job runs twice and a scripted peer (a fake model's replies) is used up
# by the first attempt. Tests that start a renderer or configure a model get a lease of ten
# seconds unless they ask for another; lease expiry has its own tests.
ROOMY_LEASE: dict[str, Any] = {"job_lease_seconds": 10.0, "job_heartbeat_interval_seconds": 1.0}


@asynccontextmanager
async def running_app(db_url: str, **over: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app started (database, runtime, loops) with a client bound to it."""
    roomy = ROOMY_LEASE if over.get("renderers") or over.get("ai_base_url") else {}
    app = create_app(fast_settings(database_url=db_url, **{**roomy, **over}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://deckyard.test") as c:
            yield app, c


async def make_token(app: FastAPI, workspace: str) -> dict[str, str]:
    """Authorization headers for a new token in `workspace`."""
    token = await token_create(app.state.db, workspace, SYSTEM_CLOCK.now())
    return {"authorization": f"Bearer {token}"}
