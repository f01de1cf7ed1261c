"""`deckyard render` and `deckyard validate`: a deck folder through the whole pipeline.

The commands parse their arguments here; the pipeline (`deckyard.cli.pipeline`, which starts a
whole `Node`) is imported only when a command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deckyard.cli.common import fail

FORMATS = ("png", "pdf", "zip")
USAGE = 2


def usage_problems(deck_dir: Path, formats: str | None) -> list[str]:
    """What is wrong with the arguments, found before anything heavy is imported or started."""
    problems = []
    if not deck_dir.exists():
        problems.append(f"{deck_dir}: no such folder; give the deck's folder (with deck.toml)")
    elif not deck_dir.is_dir():
        problems.append(f"{deck_dir} is a file; give the deck's folder (with deck.toml)")
    if formats is not None:
        wanted = {f.strip() for f in formats.split(",") if f.strip()}
        unknown = wanted - set(FORMATS)
        if unknown:
            problems.append(
                f"unknown format(s) {', '.join(sorted(unknown))}; use {','.join(FORMATS)}"
            )
    return problems


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
    passed (warnings allowed), 1 on content failures, 2 on usage errors, 3 when the renderer
    was unavailable.
    """
    problems = usage_problems(deck_dir, formats)
    if problems:
        fail(problems, USAGE)
    from deckyard.cli.pipeline import run_command

    raise typer.Exit(run_command(deck_dir, out, formats, database_url, verbose))


def validate(
    deck_dir: Annotated[Path, typer.Argument(help="The deck folder (deck.toml, pages/, assets/).")],
    database_url: Annotated[
        str | None, typer.Option("--database", help="Database URL (default: a temporary SQLite).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Log what the server does.")] = False,
) -> None:
    """Validate every page of a deck (compile and render check); writes no artefacts.

    Exit 0 when every page passed (warnings allowed), 1 on content failures, 3 when the
    renderer was unavailable and nothing could be verified; 2 on usage errors.
    """
    problems = usage_problems(deck_dir, None)
    if problems:
        fail(problems, USAGE)
    from deckyard.cli.pipeline import run_command

    raise typer.Exit(run_command(deck_dir, None, "", database_url, verbose))
