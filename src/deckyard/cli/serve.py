"""`deckyard serve` and `deckyard renderer`: the long-running processes.

`serve` runs the API server behind the Lite guard (one process per SQLite file), then uvicorn;
`renderer` runs a renderer process. uvicorn, the app and the renderer are imported when the
command runs, not when the CLI starts.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from deckyard.cli.common import fail, load_settings

if TYPE_CHECKING:
    from deckyard.config import Settings


def configure_logging() -> None:
    """Structured-enough logs: time, level, logger, message (ids are in the messages)."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def run_server(settings: Settings) -> None:
    """Serve the API until interrupted; refuses a second process on a SQLite file."""
    import uvicorn

    from deckyard.db import sqlite_file
    from deckyard.db.lite import LiteLockError, lite_lock
    from deckyard.eventloop import resolve

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
                # Workers are fresh processes that build the app from the environment: hand
                # them these settings (command-line flags included) whole.
                from deckyard.config import SETTINGS_ENV

                os.environ[SETTINGS_ENV] = settings.to_env_json()
                uvicorn.run(
                    "deckyard.api.app:create_app_from_env",
                    factory=True,
                    host=settings.host,
                    port=settings.port,
                    workers=settings.workers,
                    log_level="info",
                    loop=resolve(settings.event_loop),
                )
            else:
                from deckyard import tracing
                from deckyard.api.app import create_app

                tracing.configure(settings, "api")
                uvicorn.run(
                    create_app(settings),
                    host=settings.host,
                    port=settings.port,
                    log_level="info",
                    loop=resolve(settings.event_loop),
                )
    except LiteLockError as exc:
        fail(str(exc))


def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    workers: Annotated[
        int | None, typer.Option(help="HTTP worker processes (PostgreSQL only).")
    ] = None,
    database_url: Annotated[str | None, typer.Option("--database", help="Database URL.")] = None,
    no_background_loops: Annotated[
        bool, typer.Option("--no-background-loops", help="Serve reads but run no loop.")
    ] = False,
    no_migrate: Annotated[
        bool, typer.Option("--no-migrate", help="Do not apply migrations at start.")
    ] = False,
    reconciliation_interval_seconds: Annotated[
        float | None,
        typer.Option(help="How often stale tasks are looked for (default 300)."),
    ] = None,
    disable_reconciliation_loop: Annotated[
        bool, typer.Option("--disable-reconciliation-loop", help="Never resume stale tasks.")
    ] = False,
    renderers: Annotated[
        int | None,
        typer.Option(help="Renderer subprocesses to supervise (default 1; 0 for none)."),
    ] = None,
) -> None:
    """Run the API server (and, in Lite, its background loops)."""
    settings = load_settings(
        host=host,
        port=port,
        workers=workers,
        database_url=database_url,
        background_loops=False if no_background_loops else None,
        migrate_on_start=False if no_migrate else None,
        reconciliation_interval_seconds=reconciliation_interval_seconds,
        reconciliation_enabled=False if disable_reconciliation_loop else None,
        renderers=renderers,
    )
    run_server(settings)


def renderer(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (0: pick one).")] = None,
    slots: Annotated[int | None, typer.Option(help="Concurrent renders.")] = None,
    secret_file: Annotated[
        Path | None,
        typer.Option(help="Read the shared secret from this file instead of the environment."),
    ] = None,
    generate_secret: Annotated[
        bool, typer.Option("--generate-secret", help="Print a fresh secret and exit.")
    ] = False,
) -> None:
    """Run a renderer process: a Chromium pool behind a signed HTTP control API.

    It refuses to start (exit 2) without a secret, taken from DECKYARD_RENDERER_SECRET or
    --secret-file. Once listening it prints one JSON line with its URL and epoch to stdout.
    """
    from deckyard.render.renderer.main import generate_secret as new_secret
    from deckyard.render.renderer.main import run_renderer

    if generate_secret:
        typer.echo(new_secret())
        return
    secret: str | None = None
    if secret_file is not None:
        try:
            secret = secret_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            fail(f"cannot read --secret-file: {exc}")
        if not secret:
            fail(f"--secret-file {secret_file} is empty")
    settings = load_settings(
        renderer_host=host, renderer_port=port, renderer_slots=slots, renderer_secret=secret
    )
    run_renderer(settings)
