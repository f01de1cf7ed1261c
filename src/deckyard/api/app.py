"""The FastAPI application and its lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from deckyard import __version__
from deckyard.api.health import router as health_router
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.db.migrate import upgrade

log = logging.getLogger(__name__)


def create_app(settings: Settings) -> FastAPI:
    """Build the app; the database opens (and migrates) when it starts."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = Database.from_settings(settings)
        if settings.migrate_on_start:
            await upgrade(db)
        await db.start_listening()
        app.state.db = db
        app.state.settings = settings
        log.info("database %s ready", db.display_name)
        try:
            yield
        finally:
            await db.dispose()

    app = FastAPI(title="Deckyard", version=__version__, lifespan=lifespan, docs_url="/docs")
    app.include_router(health_router)
    return app


def create_app_from_env() -> FastAPI:
    """An app configured from the environment (used by uvicorn with several workers)."""
    return create_app(Settings.load())
