"""`deckyard render` and `deckyard validate`: a deck folder or Markdown file through the pipeline.

The commands parse their arguments here; the pipeline (`deckyard.cli.pipeline`, which starts a
whole `RenderNode`) is imported only when a command runs, after its renderer process was spawned
(`deckyard.cli.early_renderer`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deckyard.cli.common import FORMATS, fail

USAGE = 2
NoCache = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Render every page, reusing nothing from earlier runs (the render cache in "
        "~/.cache/deckyard/renders is neither read nor written).",
    ),
]


def usage_problems(deck_dir: Path, formats: str | None) -> list[str]:
    """What is wrong with the arguments, found before anything heavy is imported or started."""
    problems = []
    # a Markdown deck, or a reveal.js deck's HTML file (`talk/demo.html`: the loader checks it)
    single_file = deck_dir.suffix.lower() in (".md", ".markdown", ".html", ".htm")
    if not deck_dir.exists():
        problems.append(
            f"{deck_dir}: no such folder or file; give the deck's folder (with deck.toml), "
            "a Markdown deck (.md) or a reveal.js deck's HTML file"
        )
    elif not deck_dir.is_dir() and not single_file:
        problems.append(
            f"{deck_dir} is a file; give the deck's folder (with deck.toml), "
            "a Markdown deck (.md) or a reveal.js deck's HTML file"
        )
    if formats is not None:
        wanted = {f.strip() for f in formats.split(",") if f.strip()}
        unknown = wanted - set(FORMATS)
        if unknown:
            problems.append(
                f"unknown format(s) {', '.join(sorted(unknown))}; use {','.join(FORMATS)}"
            )
    return problems


def render(
    deck_dir: Annotated[
        Path, typer.Argument(help="The deck folder (deck.toml, pages/, assets/) or a .md deck.")
    ],
    out: Annotated[Path, typer.Option("--out", help="Where to write the artefacts.")],
    formats: Annotated[
        str,
        typer.Option(
            "--format",
            help="Comma-separated: png, jpeg, webp (a picture per page, in pages/), pdf, zip "
            "(site), pptx.",
        ),
    ] = "png,pdf,zip",
    database_url: Annotated[
        str | None,
        typer.Option("--database", help="Database URL (default: a SQLite in the user cache)."),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Log what the server does.")] = False,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Fetch nothing: a remote image, font or stylesheet fails its page.",
        ),
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Write nothing unless every page passed.")
    ] = False,
    pdf_tagged: Annotated[
        bool,
        typer.Option("--pdf-tagged", help="Make deck.pdf a tagged PDF (for screen readers)."),
    ] = False,
    steps: Annotated[
        bool,
        typer.Option(
            "--steps",
            help="A PNG, a PDF page and a PPTX slide per step of each slide (reveal.js "
            "fragments, Marp fragmented lists, Slidev clicks), numbered as their slide.",
        ),
    ] = False,
    no_cache: NoCache = False,
) -> None:
    """Validate, screenshot, build and export a deck with its own renderer.

    Writes OUT/pages/NN-name.png, OUT/deck.pdf, OUT/site.zip (OUT/deck.pptx with pptx: an
    editable slide where the page allows it, else its picture) and OUT/deckyard-manifest.json
    (what it wrote and each page's status; files an earlier run wrote and this one did not are
    removed). Remote images, fonts and stylesheets are downloaded first (through the SSRF
    guard) unless --offline. A page that fails is left out of the PDF and the site and gets
    no PNG; the rest is written (with --strict, nothing is). Exit 0 when every page passed
    (warnings allowed), 1 on content failures, 2 on usage errors, 3 when the renderer was
    unavailable. A page whose render an earlier run made, with the same code, Chromium, fonts
    and settings, is reused from the render cache unless --no-cache.
    """
    problems = usage_problems(deck_dir, formats)
    if problems:
        fail(problems, USAGE)
    from deckyard.cli.early_renderer import launch

    raise typer.Exit(
        launch(
            deck_dir,
            out,
            formats,
            database_url,
            verbose,
            offline=offline,
            strict=strict,
            pdf_tagged=pdf_tagged,
            steps=steps,
            reuse=not no_cache,
        )
    )


def validate(
    deck_dir: Annotated[
        Path, typer.Argument(help="The deck folder (deck.toml, pages/, assets/) or a .md deck.")
    ],
    database_url: Annotated[
        str | None, typer.Option("--database", help="Database URL (default: a temporary SQLite).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Log what the server does.")] = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="Fetch nothing: a remote file fails its page.")
    ] = False,
    no_cache: NoCache = False,
) -> None:
    """Validate every page of a deck (compile and render check); writes no artefacts.

    Exit 0 when every page passed (warnings allowed), 1 on content failures, 2 on usage
    errors, 3 when the renderer was unavailable and nothing could be verified.
    """
    problems = usage_problems(deck_dir, None)
    if problems:
        fail(problems, USAGE)
    from deckyard.cli.early_renderer import launch

    raise typer.Exit(
        launch(deck_dir, None, "", database_url, verbose, offline=offline, reuse=not no_cache)
    )
