"""Running the API server: the Lite guard, then uvicorn."""

from __future__ import annotations

import logging

import uvicorn

from deckyard.config import Settings
from deckyard.db import sqlite_file
from deckyard.db.lite import LiteLockError, lite_lock


def configure_logging() -> None:
    """Structured-enough logs: time, level, logger, message (ids are in the messages)."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def run_server(settings: Settings) -> None:
    """Serve the API until interrupted; refuses a second process on a SQLite file."""
    from deckyard.cli import fail

    url = settings.resolved_database_url
    db_file = sqlite_file(url)
    if db_file is not None and settings.workers > 1:
        fail(
            f"--workers {settings.workers} needs PostgreSQL: the SQLite database {db_file} "
            "belongs to one process. Use --workers 1, or set DECKYARD_DATABASE_URL to PostgreSQL."
        )
    configure_logging()
    try:
        with lite_lock(url, role=f"deckyard serve on {settings.host}:{settings.port}"):
            if settings.workers > 1:
                uvicorn.run(
                    "deckyard.api.app:create_app_from_env",
                    factory=True,
                    host=settings.host,
                    port=settings.port,
                    workers=settings.workers,
                    log_level="info",
                )
            else:
                from deckyard.api.app import create_app

                uvicorn.run(
                    create_app(settings), host=settings.host, port=settings.port, log_level="info"
                )
    except LiteLockError as exc:
        fail(str(exc))
