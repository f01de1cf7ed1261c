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


@asynccontextmanager
async def running_app(db_url: str, **over: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app started (database, runtime, loops) with a client bound to it."""
    app = create_app(fast_settings(database_url=db_url, **over))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://deckyard.test") as c:
            yield app, c


async def make_token(app: FastAPI, workspace: str) -> dict[str, str]:
    """Authorization headers for a new token in `workspace`."""
    token = await token_create(app.state.db, workspace, SYSTEM_CLOCK.now())
    return {"authorization": f"Bearer {token}"}
