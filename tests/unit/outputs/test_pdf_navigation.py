"""The navigable PDF's facts and rewriting, without a browser: a PDF made with pikepdf stands
in for Chromium's (named `#slide-N` destinations, as Chromium prints them)."""

from __future__ import annotations

import io

import pikepdf
import pytest
from pydantic import ValidationError

from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_print_document
from deckyard.decks.source.deck_source import DeckManifest, DeckSource, PageKind, PageSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.markdown_file import load_markdown_bytes
from deckyard.outputs.pdf_navigation import (
    PdfFacts,
    navigable_pdf,
    size_warning,
    slide_titles,
)
from deckyard.render.control.models import ScreenshotSpec

MIB = 1024 * 1024


def chromium_like_pdf(pages: int, links: dict[int, str]) -> bytes:
    """`pages` blank pages; page i has a link to the named destination `links[i]`."""
    pdf = pikepdf.new()
    for _ in range(pages):
        pdf.add_blank_page(page_size=(600, 337.5))
    dests = pikepdf.Dictionary()
    for i in range(pages):
        top = [pdf.pages[i].obj, pikepdf.Name.XYZ, 0, 337.5, 0]
        dests[f"/slide-{i + 1}"] = pikepdf.Array(top)
    pdf.Root.Dests = pdf.make_indirect(dests)
    for index, name in links.items():
        annot = pikepdf.Dictionary(
            Type=pikepdf.Name.Annot,
            Subtype=pikepdf.Name.Link,
            Rect=[10, 10, 50, 20],
            Dest=pikepdf.Name("/" + name),
        )
        pdf.pages[index].obj.Annots = pdf.make_indirect(pikepdf.Array([annot]))
    out = io.BytesIO()
    pdf.save(out)
    return out.getvalue()


def page_index(pdf: pikepdf.Pdf, dest: pikepdf.Array) -> int:
    return [p.obj.objgen for p in pdf.pages].index(dest[0].objgen)


def test_slide_titles_are_each_slides_first_heading_else_its_number() -> None:
    deck = DeckSource(
        manifest=DeckManifest(title="T"),
        pages=[
            PageSource(name="a", kind=PageKind.MARKDOWN, text="Intro\n\n## First *words*\n"),
            PageSource(name="b", kind=PageKind.HTML, text="<p>no heading</p>"),
            PageSource(name="c", kind=PageKind.HTML, text="<h3>Third</h3><h1>Later</h1>"),
        ],
    )
    document = compile_print_document(deck, DeckLimits.from_settings(Settings()))
    assert 'id="slide-2"' in document
    assert slide_titles(document) == ["First words", "Slide 2", "Third"]


def test_slide_links_jump_to_their_page_and_the_outline_and_metadata_are_written() -> None:
    data = chromium_like_pdf(3, {0: "slide-3", 2: "slide-1", 1: "elsewhere"})
    facts = PdfFacts("Deck", "Ada", "fr", ["One", "Two", "Slide 3"])
    with pikepdf.open(io.BytesIO(navigable_pdf(data, facts))) as pdf:
        first = pdf.pages[0].obj.Annots[0]
        assert page_index(pdf, first.Dest) == 2 and first.Dest[1] == pikepdf.Name.Fit
        assert page_index(pdf, pdf.pages[2].obj.Annots[0].Dest) == 0
        assert pdf.pages[1].obj.Annots[0].Dest == pikepdf.Name("/elsewhere")
        with pdf.open_outline() as outline:
            entries = [(i.title, page_index(pdf, i.destination)) for i in outline.root]
        assert entries == [("One", 0), ("Two", 1), ("Slide 3", 2)]
        assert pdf.Root.PageMode == pikepdf.Name.UseOutlines
        assert (str(pdf.docinfo.Title), str(pdf.docinfo.Author)) == ("Deck", "Ada")
        assert str(pdf.Root.Lang) == "fr"


def test_slides_that_span_pages_start_where_chromium_put_their_anchor() -> None:
    data = chromium_like_pdf(3, {0: "slide-2"})
    with pikepdf.open(io.BytesIO(data)) as pdf:
        pdf.Root.Dests["/slide-2"] = pikepdf.Array([pdf.pages[2].obj, pikepdf.Name.Fit])
        out = io.BytesIO()
        pdf.save(out)
    facts = PdfFacts("Deck", None, "en", ["One", "Two"])
    with pikepdf.open(io.BytesIO(navigable_pdf(out.getvalue(), facts))) as pdf:
        assert page_index(pdf, pdf.pages[0].obj.Annots[0].Dest) == 2
        with pdf.open_outline() as outline:
            assert [page_index(pdf, i.destination) for i in outline.root] == [0, 2]
        assert "/Author" not in pdf.docinfo


def test_a_pdf_over_its_budget_is_warned_of_with_the_reason() -> None:
    assert size_warning(2 * MIB, 2, MIB) is None
    warning = size_warning(3 * MIB, 2, MIB)
    assert warning is not None
    assert "3.0 MiB, over its budget of 2.0 MiB" in warning
    assert "filters" in warning and "shadows" in warning and "blend modes" in warning
    assert size_warning(10**9, 1, 0) is None


def test_the_default_budget_is_two_mib_a_slide() -> None:
    assert Settings().deck_pdf_warn_bytes_per_slide == 2 * MIB


def test_pdf_tagged_is_only_for_pdf() -> None:
    spec = ScreenshotSpec(html="<p>x</p>", format="pdf", pdf_tagged=True)
    assert spec.render_input()["pdf_tagged"] is True
    assert "pdf_tagged" not in ScreenshotSpec(html="<p>x</p>").render_input()
    with pytest.raises(ValidationError, match="applies only to pdf"):
        ScreenshotSpec(html="<p>x</p>", format="png", pdf_tagged=True)


def test_a_markdown_decks_front_matter_author_reaches_the_manifest() -> None:
    text = b"---\ntitle: Talk\nauthor: Ada Lovelace\nlang: fr\n---\n\n# Hello\n"
    deck = load_markdown_bytes(text, "talk.md", DeckLimits.from_settings(Settings()))
    assert (deck.manifest.author, deck.manifest.lang) == ("Ada Lovelace", "fr")
