"""`deckyard init` (a new deck folder) and `deckyard import` (a Markdown deck to a folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deckyard.cli.common import fail


def _empty_or_new(folder: Path) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        fail(f"{folder} exists and is not an empty folder")


def init(
    folder: Annotated[Path, typer.Argument(help="The new deck folder (new or empty).")],
    title: Annotated[str, typer.Option(help="The deck's title.")] = "My deck",
) -> None:
    """Write a new deck folder: deck.toml, pages/ (Markdown and HTML examples), assets/."""
    from deckyard.decks.source.importer import init_deck

    _empty_or_new(folder)
    for name in init_deck(folder, title):
        typer.echo(f"wrote {folder / name}")
    typer.echo(f"next: deckyard render {folder} --out out")


def import_deck(
    source: Annotated[Path, typer.Argument(help="A Marp, Slidev or reveal.js Markdown file.")],
    folder: Annotated[Path, typer.Argument(help="The deck folder to write (new or empty).")],
    fetch_remote: Annotated[
        bool,
        typer.Option(
            "--fetch-remote",
            help="Download remote images into assets/ (through the SSRF guard of URL renders).",
        ),
    ] = False,
) -> None:
    """Convert a one-file Markdown deck into a deck folder, saying what was not carried over.

    Exit 0 when written (even with things not carried over, which are listed), 1 when the
    Markdown cannot be read as a deck, 2 on usage errors.
    """
    from deckyard.config import Settings
    from deckyard.decks.errors import DeckSourceError
    from deckyard.decks.source.importer import import_markdown_deck
    from deckyard.decks.source.limits import DeckLimits
    from deckyard.decks.source.markdown_file import is_markdown_file

    if not source.is_file() or not is_markdown_file(source.name):
        fail(f"{source} is not a Markdown file (.md)")
    _empty_or_new(folder)
    settings = Settings.load()
    fetch = None
    if fetch_remote:
        from deckyard.cli.fetch_remote import guarded_fetcher

        fetch = guarded_fetcher(settings)
    try:
        report = import_markdown_deck(source, folder, DeckLimits.from_settings(settings), fetch)
    except DeckSourceError as exc:
        fail(f"{exc.message} [{exc.code}]", code=1)
    typer.echo(f"wrote {folder / 'deck.toml'} and {len(report.pages)} page(s) in {folder}/pages")
    for copied in report.copied:
        typer.echo(f"copied {copied}")
    for item in report.not_carried:
        typer.echo(f"not carried over: {item}")
    typer.echo(f"next: deckyard render {folder} --out out")
