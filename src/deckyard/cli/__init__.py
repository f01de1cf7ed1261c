"""The `deckyard` command line: a thin shell over the packages, one module per command group.

`serve` (the API server and the renderer process), `admin` (migrate, tokens, jobs), `render`
(render and validate a deck folder or Markdown file), `scaffold` (init, import), `doctor` and
`baseline`. Each command imports what it
runs when it runs, so `deckyard --help` and usage errors stay fast.
"""

from __future__ import annotations

import sys

import typer

from deckyard.cli import admin, baseline, doctor, render, scaffold, serve

app = typer.Typer(
    name="deckyard",
    help="Check, render and publish web-presentation decks as durable jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(serve.serve)
app.command()(admin.migrate)
app.command()(serve.renderer)
app.command()(baseline.baseline)
app.command()(doctor.doctor)
app.command()(render.render)
app.command()(render.validate)
app.command()(scaffold.init)
app.command(name="import")(scaffold.import_deck)
app.add_typer(admin.token_app, name="token")
app.add_typer(admin.jobs_app, name="jobs")


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
