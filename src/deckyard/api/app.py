"""The FastAPI application: HTTP on top of a `Node` that its lifespan starts and stops."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from deckyard import __version__, tracing
from deckyard.api.ai import ai_metrics
from deckyard.api.ai import router as ai_router
from deckyard.api.audit import AuditMiddleware
from deckyard.api.audit import router as audit_router
from deckyard.api.content_headers import ContentHeadersMiddleware
from deckyard.api.dashboard import router as dashboard_router
from deckyard.api.dashboard_decks import router as dashboard_decks_router
from deckyard.api.deck_assets import router as deck_assets_router
from deckyard.api.deck_pages import router as deck_pages_router
from deckyard.api.deck_style import router as deck_style_router
from deckyard.api.decks import router as decks_router
from deckyard.api.errors import (
    BodyLimitMiddleware,
    InfrastructureErrorMiddleware,
    install_error_handlers,
)
from deckyard.api.external_workers import router as external_workers_router
from deckyard.api.head import HeadMiddleware
from deckyard.api.health import router as health_router
from deckyard.api.idempotency import IdempotencyMiddleware
from deckyard.api.jobs import router as jobs_router
from deckyard.api.maintenance import ApiMaintenance
from deckyard.api.metrics import router as metrics_router
from deckyard.api.openapi import install_openapi
from deckyard.api.renders import render_metrics, renderers_router
from deckyard.api.renders import router as renders_router
from deckyard.api.site_files import router as site_files_router
from deckyard.api.sites import router as sites_router
from deckyard.api.storage import router as storage_router
from deckyard.api.tasks import router as tasks_router
from deckyard.api.tokens import router as tokens_router
from deckyard.api.tracing import TracingMiddleware
from deckyard.api.validate import router as validate_router
from deckyard.api.webhooks import router as webhooks_router
from deckyard.api.workspace import router as workspace_router
from deckyard.config import SETTINGS_ENV, Settings
from deckyard.node import Node


def create_app(settings: Settings, *, node: Node | None = None) -> FastAPI:
    """Build the app; its node (a new one unless given) starts and stops with the lifespan.

    The routes read the node's parts from `app.state` (`db`, `runtime`, `tasks`, `render`,
    `decks`, `ai`, `external`, `settings`); `loop_owners` lists everything that runs loops,
    for `/readyz`.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        n = node or Node(settings)
        n.add(ApiMaintenance(n.db, settings, n.clock))
        app.state.node = n
        app.state.db = n.db
        app.state.settings = settings
        app.state.runtime = n.runtime
        app.state.tasks = n.tasks
        app.state.render = n.render
        app.state.decks = n.decks
        app.state.ai = n.ai
        app.state.external = n.external
        app.state.webhooks = n.webhooks
        app.state.loop_owners = n.loop_owners
        app.state.metric_sources = [ai_metrics(n.ai), render_metrics(n.render)]
        async with n:
            yield

    app = FastAPI(
        title="Deckyard",
        version=__version__,
        summary="Check, render and publish web-presentation decks as durable jobs.",
        lifespan=lifespan,
        docs_url=None,  # `install_openapi` serves Swagger UI from the package, not a CDN
        redoc_url=None,
    )
    install_error_handlers(app)
    app.add_middleware(AuditMiddleware)
    app.add_middleware(IdempotencyMiddleware, max_body_size=settings.api_max_body_bytes)
    app.add_middleware(InfrastructureErrorMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_body_size=settings.api_max_body_bytes)
    app.add_middleware(HeadMiddleware)
    app.add_middleware(ContentHeadersMiddleware)
    app.add_middleware(TracingMiddleware)  # outermost: its span covers the others
    app.include_router(health_router)
    app.include_router(metrics_router)
    app.include_router(jobs_router)
    app.include_router(tasks_router)
    app.include_router(renderers_router)
    app.include_router(renders_router)
    app.include_router(decks_router)
    app.include_router(deck_pages_router)
    app.include_router(deck_assets_router)
    app.include_router(deck_style_router)
    app.include_router(sites_router)
    app.include_router(site_files_router)
    app.include_router(tokens_router)
    app.include_router(audit_router)
    app.include_router(storage_router)
    app.include_router(validate_router)
    app.include_router(ai_router)
    app.include_router(external_workers_router)
    app.include_router(webhooks_router)
    app.include_router(workspace_router)
    app.include_router(dashboard_router)
    app.include_router(dashboard_decks_router)
    install_openapi(app)
    return app


def create_app_from_env() -> FastAPI:
    """An app configured from the environment (used by uvicorn with several workers).

    `deckyard serve --workers N` puts its resolved settings in `DECKYARD_SERVE_SETTINGS`, so
    every worker gets the command line's flags, not only the environment's.
    """
    given = os.environ.get(SETTINGS_ENV)
    settings = Settings.load(**json.loads(given)) if given else Settings.load()
    tracing.configure(settings, "api")  # a worker process's start
    return create_app(settings)
