"""The FastAPI application: its lifespan wires the database, the job runtime and the loops."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from deckyard import __version__
from deckyard.ai.errors import AI_QUEUE
from deckyard.ai.service import AiService
from deckyard.api.agents import router as agents_router
from deckyard.api.ai import router as ai_router
from deckyard.api.dashboard import router as dashboard_router
from deckyard.api.deck_pages import router as deck_pages_router
from deckyard.api.decks import router as decks_router
from deckyard.api.errors import BodyLimitMiddleware, install_error_handlers
from deckyard.api.health import router as health_router
from deckyard.api.idempotency import IdempotencyMiddleware
from deckyard.api.jobs import router as jobs_router
from deckyard.api.maintenance import ApiMaintenance
from deckyard.api.metrics import router as metrics_router
from deckyard.api.render import router as render_router
from deckyard.api.tasks import router as tasks_router
from deckyard.api.validate import router as validate_router
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.db.migrate import upgrade
from deckyard.decks.jobs.names import DECK_QUEUE
from deckyard.decks.service import DeckService
from deckyard.jobs import Runtime
from deckyard.render.control.service import RenderService
from deckyard.tasks import TaskExecutor

log = logging.getLogger(__name__)


def create_app(settings: Settings) -> FastAPI:
    """Build the app; the database opens, migrates and the loops start when it starts."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = Database.from_settings(settings)
        if settings.migrate_on_start:
            await upgrade(db)
        runtime = Runtime(db, settings=settings, migrate=False)
        executor = TaskExecutor(db, runtime, settings)
        render = RenderService(
            db, runtime, settings, supervise=None if settings.background_loops else False
        )
        app.state.decks = DeckService(db, runtime, render, executor, settings)
        app.state.ai = ai = AiService(db, runtime, app.state.decks, settings)
        own_workers = {DECK_QUEUE, AI_QUEUE}
        runtime.worker(sorted({h.queue for h in runtime.handlers.values()} - own_workers))
        runtime.worker([DECK_QUEUE], concurrency=settings.deck_job_concurrency)
        if ai.configured:
            runtime.worker([AI_QUEUE], concurrency=settings.ai_job_concurrency)
        app.state.db = db
        app.state.settings = settings
        app.state.runtime = runtime
        app.state.tasks = executor
        app.state.render = render
        maintenance = ApiMaintenance(db, settings)
        app.state.loop_owners = [runtime, executor, maintenance, render]
        app.state.metric_sources = []
        await runtime.start(run_loops=settings.background_loops)
        await executor.start(run_loops=settings.background_loops)
        if settings.background_loops:
            maintenance.start()
            await render.start()
        log.info(
            "deckyard %s ready on %s; loops: %s",
            __version__,
            db.display_name,
            ", ".join(lp.name for lp in runtime.loops if lp.alive) or "none",
        )
        try:
            yield
        finally:
            await render.stop()
            await maintenance.stop()
            await executor.stop()
            await runtime.stop()
            await ai.close()
            await db.dispose()

    app = FastAPI(
        title="Deckyard",
        version=__version__,
        summary="Check, render and publish web-presentation decks as durable jobs.",
        lifespan=lifespan,
        docs_url="/docs",
    )
    install_error_handlers(app)
    app.add_middleware(IdempotencyMiddleware, max_body_size=settings.api_max_body_bytes)
    app.add_middleware(BodyLimitMiddleware, max_body_size=settings.api_max_body_bytes)
    app.include_router(health_router)
    app.include_router(metrics_router)
    app.include_router(jobs_router)
    app.include_router(tasks_router)
    app.include_router(render_router)
    app.include_router(decks_router)
    app.include_router(deck_pages_router)
    app.include_router(validate_router)
    app.include_router(ai_router)
    app.include_router(agents_router)
    app.include_router(dashboard_router)
    return app


def create_app_from_env() -> FastAPI:
    """An app configured from the environment (used by uvicorn with several workers)."""
    return create_app(Settings.load())
