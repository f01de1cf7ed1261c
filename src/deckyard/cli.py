"""The `deckyard` command line: a thin shell over the packages."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from deckyard.config import Settings, SettingsError

app = typer.Typer(
    name="deckyard",
    help="Check, render and publish web-presentation decks as durable jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(lines: list[str] | str, code: int = 2) -> NoReturn:
    """Print one readable line per problem to stderr and exit with `code`."""
    for line in [lines] if isinstance(lines, str) else lines:
        err.print(f"deckyard: {line}", markup=False)
    raise typer.Exit(code)


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment plus command-line overrides; exit 2 when invalid."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings.load(**given)
    except SettingsError as exc:
        fail(exc.problems)


@app.command()
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
    from deckyard.server import run_server

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


@app.command()
def migrate(
    database_url: Annotated[str | None, typer.Option("--database", help="Database URL.")] = None,
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
    downgrade: Annotated[bool, typer.Option(help="Downgrade to the revision instead.")] = False,
) -> None:
    """Apply (or undo) database migrations."""
    from deckyard.db.lite import LiteLockError, lite_lock
    from deckyard.db.migrate import downgrade_to, upgrade_to

    settings = load_settings(database_url=database_url)
    url = settings.resolved_database_url
    try:
        with lite_lock(url, role="migrate"):
            if downgrade:
                asyncio.run(downgrade_to(url, revision))
            else:
                asyncio.run(upgrade_to(url, revision))
    except LiteLockError as exc:
        fail(str(exc))
    err.print(f"database at {revision}" if not downgrade else f"downgraded to {revision}")


@app.command()
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


@app.command()
def baseline(
    idle: Annotated[float, typer.Option("--idle", min=1, help="Seconds of idle window.")] = 60,
    mixed: Annotated[
        float,
        typer.Option("--mixed", min=0, help="Then seconds of mixed load (edits, shots, builds)."),
    ] = 0,
    database_url: Annotated[
        str | None, typer.Option("--database", help="Database URL (default: a fresh SQLite).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run the instrumented server and print SQL per loop for an idle window (writes must be 0)."""
    import json
    import tempfile

    from deckyard.baseline import as_dict, run_baseline

    with tempfile.TemporaryDirectory(prefix="deckyard-baseline-") as tmp:
        settings = load_settings(
            database_url=database_url or f"sqlite:///{tmp}/baseline.db", data_dir=tmp
        )
        from deckyard.baseline_load import mixed_load

        reports = asyncio.run(run_baseline(settings, idle, mixed_load if mixed else None, mixed))
    if as_json:
        typer.echo(json.dumps(as_dict(reports), indent=2))
        return
    from rich.table import Table

    out = Console(highlight=False)
    for r in reports:
        table = Table(
            "loop",
            "reads/s",
            "writes/s",
            "write tx/s",
            "zero-row writes",
            "ticks",
            "p50 ms",
            "p95 ms",
            title=f"{r.name}: {r.seconds:.1f} s, database is locked: "
            f"{r.locked_errors}, RSS {r.rss_bytes / 2**20:.0f} MiB, with renderers (PSS) "
            f"{r.tree_pss_bytes / 2**20:.0f} MiB",
        )
        for row in r.loops:
            table.add_row(
                row["loop"],
                f"{row['reads_per_s']:.3f}",
                f"{row['writes_per_s']:.3f}",
                f"{row['write_tx_per_s']:.3f}",
                str(row["zero_row_writes"]),
                str(row["ticks"]),
                f"{row['tick_p50_ms']:.2f}",
                f"{row['tick_p95_ms']:.2f}",
            )
        out.print(table)


@app.command()
def doctor() -> None:
    """Check Chromium, fonts, the database and renderers, and say what to do about each."""
    from deckyard.doctor import run_doctor

    settings = load_settings()
    raise typer.Exit(run_doctor(settings))


@app.command()
def render(
    deck_dir: Annotated[Path, typer.Argument(help="The deck folder (deck.toml, pages/, assets/).")],
    out: Annotated[Path, typer.Option("--out", help="Where to write the artefacts.")],
    formats: Annotated[
        str, typer.Option("--format", help="Comma-separated: png (pages), pdf, zip (site).")
    ] = "png,pdf,zip",
    database_url: Annotated[
        str | None, typer.Option("--database", help="Database URL (default: SQLite in --out).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Log what the server does.")] = False,
) -> None:
    """Validate, screenshot, build and export a deck with its own renderer.

    Writes OUT/pages/NN-name.png, OUT/deck.pdf and OUT/site.zip. Exit 0 when every page
    passed (warnings allowed), 1 on content failures, 3 when the renderer was unavailable.
    """
    from deckyard.render_cli import run_command

    raise typer.Exit(run_command(deck_dir, out, formats, database_url, verbose))


@app.command()
def validate(
    deck_dir: Annotated[Path, typer.Argument(help="The deck folder (deck.toml, pages/, assets/).")],
    database_url: Annotated[
        str | None, typer.Option("--database", help="Database URL (default: a temporary SQLite).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Log what the server does.")] = False,
) -> None:
    """Validate every page of a deck (compile and render check); writes no artefacts.

    Exit 0 when every page passed (warnings allowed), 1 on content failures, 3 when the
    renderer was unavailable and nothing could be verified.
    """
    from deckyard.render_cli import run_command

    raise typer.Exit(run_command(deck_dir, None, "", database_url, verbose))


def _register_subcommands() -> None:
    from deckyard.cli_admin import jobs_app, token_app

    app.add_typer(token_app, name="token")
    app.add_typer(jobs_app, name="jobs")


def main() -> None:
    """Console-script entry point."""
    _register_subcommands()
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
