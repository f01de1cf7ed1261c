"""`deckyard render` makes a navigable PDF: outline, links, metadata, tagged on request."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pikepdf
import pytest

from tests.e2e.conftest import DECKYARD, clean_env

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

MANIFEST = """title = "Navigable Deck"
author = "Ada Lovelace"
lang = "de-CH"

[slide]
width = 800
height = 450
"""
PAGES = {
    "01-cover.md": "# Welcome aboard\n\nSee [the project](https://example.com/deckyard) "
    "and [the end](#slide-3).\n",
    "02-middle.html": '<h2>The <em>middle</em> part</h2>\n<p><a href="#slide-1">Back</a></p>\n',
    "03-end.md": "## The end\n\nThanks.\n",
    "04-blank.html": "<p>No heading on this slide.</p>\n",
}


def make_deck(root: Path) -> Path:
    deck = root / "deck"
    (deck / "pages").mkdir(parents=True)
    (deck / "deck.toml").write_text(MANIFEST)
    for name, text in PAGES.items():
        (deck / "pages" / name).write_text(text)
    return deck


def render(tmp_path: Path, *args: str, **env: str) -> tuple[pikepdf.Pdf, str]:
    out = tmp_path / "out"
    deck = make_deck(tmp_path)
    done = subprocess.run(
        [*DECKYARD, "render", str(deck), "--out", str(out), "--format", "pdf", *args],
        env=clean_env(tmp_path, **env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return pikepdf.open(out / "deck.pdf"), done.stdout


def page_of(pdf: pikepdf.Pdf, dest: pikepdf.Array) -> int:
    """The index of the page an explicit destination points at."""
    pages = [p.obj.objgen for p in pdf.pages]
    return pages.index(dest[0].objgen)


def links(pdf: pikepdf.Pdf) -> list[tuple[int, str]]:
    """Every link annotation as (page index, `uri:...` or `page:N`)."""
    found: list[tuple[int, str]] = []
    for index, page in enumerate(pdf.pages):
        for annot in page.obj.get("/Annots", []):
            if annot.get("/Subtype") != "/Link":
                continue
            if "/Dest" in annot:
                found.append((index, f"page:{page_of(pdf, annot.Dest)}"))
            else:
                found.append((index, f"uri:{annot.A.URI}"))
    return found


def test_the_pdf_has_an_outline_working_links_and_the_decks_metadata(tmp_path: Path) -> None:
    pdf, _ = render(tmp_path)
    with pdf:
        assert len(pdf.pages) == 4
        with pdf.open_outline() as outline:
            entries = [(item.title, page_of(pdf, item.destination)) for item in outline.root]
        assert entries == [
            ("Welcome aboard", 0),
            ("The middle part", 1),
            ("The end", 2),
            ("Slide 4", 3),
        ]
        assert sorted(links(pdf)) == [
            (0, "page:2"),
            (0, "uri:https://example.com/deckyard"),
            (1, "page:0"),
        ]
        assert str(pdf.docinfo.Title) == "Navigable Deck"
        assert str(pdf.docinfo.Author) == "Ada Lovelace"
        assert str(pdf.Root.Lang) == "de-CH"
        with pdf.open_metadata() as meta:
            assert meta["dc:creator"] == ["Ada Lovelace"]
        assert "/StructTreeRoot" not in pdf.Root


def test_pdf_tagged_adds_the_structure_tree_and_a_big_pdf_is_warned_of(tmp_path: Path) -> None:
    pdf, stdout = render(tmp_path, "--pdf-tagged", DECKYARD_DECK_PDF_WARN_BYTES_PER_SLIDE="100")
    with pdf:
        assert "/StructTreeRoot" in pdf.Root
        assert bool(pdf.Root.MarkInfo.Marked) is True
        with pdf.open_outline() as outline:
            assert [item.title for item in outline.root][:1] == ["Welcome aboard"]
    flat = " ".join(stdout.split())
    assert "warning: pdf: the PDF is" in flat
    assert "blend modes" in flat
