"""Makes an exported deck PDF navigable: outline, working internal links, metadata.

Chromium prints the deck's print document and knows nothing of slides. The facts come from
the compiled print document instead (`deck_outline`): each slide's title (its first heading,
else "Slide N") and the page it starts on. `navigable_pdf` then rewrites the PDF with pikepdf:

* an outline (bookmarks) with one entry per slide;
* every link to `#slide-N` made an explicit jump to slide N's page. Chromium prints such a
  link (the print document gives each slide the id `slide-N`) as a named destination, which
  some viewers and tools ignore; a link to an id that no slide has gets no annotation at all;
* the document information and XMP metadata: title, author, and the catalogue's `/Lang`.

External links need nothing: Chromium prints them as `/URI` link annotations already. This
runs where the `pdf` format builds (the deck job's process), never in the renderer, which stays
a plain HTML-to-PDF printer.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

import lxml.html
import pikepdf
from lxml.html import HtmlElement

from deckyard.outputs.interface import SLIDE_ANCHOR_PREFIX

_HEADINGS = ["h1", "h2", "h3", "h4", "h5", "h6"]
_SLIDE_LINK = re.compile(rf"^#?{re.escape(SLIDE_ANCHOR_PREFIX)}(\d+)$")
_MAX_TITLE = 200
RASTERISED_CSS_HINT = (
    "Chromium prints CSS filters, box and text shadows, blend modes and backdrop filters as "
    "images, which is the usual cause of a large deck PDF"
)


@dataclass(frozen=True)
class PdfFacts:
    """What the PDF should say about the deck: metadata and each slide's title."""

    title: str
    author: str | None
    lang: str
    slide_titles: list[str]
    slide_starts: list[int] | None = None
    """The page each slide starts on, when slides are not a page each (a stepped deck)."""


def _has_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


_DECK_SLIDES = f"//div[{_has_class('slide')} and @data-number]"
_REVEAL_SECTIONS = f"//*[{_has_class('reveal')}]//*[{_has_class('slides')}]//section"
_FIRST_HEADING = "(" + " | ".join(f".//{h}" for h in _HEADINGS) + ")[1]"


def _parse(document: str) -> HtmlElement:
    """The print document as an lxml tree (libxml2's HTML parser: a 100-slide document in a few
    milliseconds, where BeautifulSoup's took a third of a second of the run's tail)."""
    return lxml.html.document_fromstring(document)


def _text(element: HtmlElement) -> str:
    words = " ".join(
        t for t in element.xpath(".//text()[not(ancestor::script or ancestor::style)]")
    ).split()
    return " ".join(words)[:_MAX_TITLE]


def _deck_slides(tree: HtmlElement) -> list[HtmlElement]:
    found: list[HtmlElement] = tree.xpath(_DECK_SLIDES)
    return found


def _slide_roots(tree: HtmlElement) -> list[HtmlElement]:
    """The slides of a print document, in order: Deckyard's `.slide` roots (of a stepped deck,
    each slide's first step), or the innermost `<section>`s of a reveal.js deck."""
    slides = [t for t in _deck_slides(tree) if t.get("data-step") in (None, "0")]
    if slides:
        return slides
    sections: list[HtmlElement] = tree.xpath(_REVEAL_SECTIONS)
    return [
        s for s in sections if s.get("data-visibility") != "hidden" and not s.xpath(".//section")
    ]


def slide_titles(document: str) -> list[str]:
    """Each slide's first heading in the compiled print document, else "Slide N"."""
    titles: list[str] = []
    for number, root in enumerate(_slide_roots(_parse(document)), start=1):
        headings: list[HtmlElement] = root.xpath(_FIRST_HEADING)
        text = _text(headings[0]) if headings else ""
        titles.append(text or f"Slide {number}")
    return titles


def _step_starts(document: str) -> list[int] | None:
    """The page each slide's first step is on, in a stepped deck's print document (else None)."""
    if " data-step=" not in document:
        return None
    roots = _deck_slides(_parse(document))
    return [i for i, root in enumerate(roots) if root.get("data-step") in (None, "0")]


def deck_outline(document: str, title: str, author: str | None, lang: str) -> PdfFacts:
    """The facts `navigable_pdf` writes, from the compiled print document and the manifest."""
    return PdfFacts(title, author, lang, slide_titles(document), _step_starts(document))


def _slide_number(annot: pikepdf.Dictionary) -> int | None:
    """N when the link annotation points at `#slide-N` (a named `/Dest` or a `/GoTo`)."""
    dest = annot.get("/Dest")
    action = annot.get("/A")
    if dest is None and isinstance(action, pikepdf.Dictionary):
        dest = action.get("/D") if action.get("/S") == pikepdf.Name.GoTo else None
    if isinstance(dest, pikepdf.Name):
        name = str(dest)[1:]
    elif isinstance(dest, pikepdf.String):
        name = str(dest)
    else:
        return None
    found = _SLIDE_LINK.match(name)
    return int(found.group(1)) if found else None


def _fix_internal_links(pdf: pikepdf.Pdf, starts: list[int]) -> None:
    """Point every `#slide-N` link at slide N's page (`/Fit`)."""
    for page in pdf.pages:
        annots = page.obj.get("/Annots")
        if not isinstance(annots, pikepdf.Array):
            continue
        for annot in annots:
            if not isinstance(annot, pikepdf.Dictionary) or annot.get("/Subtype") != "/Link":
                continue
            number = _slide_number(annot)
            if number is None or not 1 <= number <= len(starts):
                continue
            if "/A" in annot:
                del annot["/A"]
            annot.Dest = pikepdf.Array([pdf.pages[starts[number - 1]].obj, pikepdf.Name.Fit])


def _slide_starts(pdf: pikepdf.Pdf, count: int) -> list[int]:
    """The page index each slide starts on: one page a slide when the counts agree (the
    print document's rule), else Chromium's own named destinations where it made them."""
    pages = len(pdf.pages)
    if count == pages:
        return list(range(count))
    starts = list(range(min(count, pages)))
    dests = pdf.Root.get("/Dests")
    if isinstance(dests, pikepdf.Dictionary):
        by_page = {page.obj.objgen: i for i, page in enumerate(pdf.pages)}
        for i in range(len(starts)):
            dest = dests.get(f"/{SLIDE_ANCHOR_PREFIX}{i + 1}")
            if isinstance(dest, pikepdf.Array) and len(dest) and dest[0].objgen in by_page:
                starts[i] = by_page[dest[0].objgen]
    return starts


def _write_outline(pdf: pikepdf.Pdf, titles: list[str], starts: list[int]) -> None:
    with pdf.open_outline() as outline:
        outline.root.clear()
        for title, start in zip(titles, starts, strict=False):
            outline.root.append(pikepdf.OutlineItem(title, start, "Fit"))
    pdf.Root.PageMode = pikepdf.Name.UseOutlines


def _write_metadata(pdf: pikepdf.Pdf, facts: PdfFacts) -> None:
    pdf.Root.Lang = pikepdf.String(facts.lang)
    with pdf.open_metadata(set_pikepdf_as_editor=False) as meta:
        meta.load_from_docinfo(pdf.docinfo)
        meta["dc:title"] = facts.title
        meta["dc:language"] = [facts.lang]
        if facts.author:
            meta["dc:creator"] = [facts.author]
    pdf.docinfo["/Title"] = pikepdf.String(facts.title)
    if facts.author:
        pdf.docinfo["/Author"] = pikepdf.String(facts.author)


def navigable_pdf(data: bytes, facts: PdfFacts) -> bytes:
    """`data`, Chromium's PDF of the print document, with outline, internal links and
    metadata; a tagged PDF keeps its structure tree."""
    with pikepdf.open(io.BytesIO(data)) as pdf:
        pages = len(pdf.pages)
        titles = facts.slide_titles or [f"Slide {n}" for n in range(1, pages + 1)]
        titles = titles[:pages]
        given = facts.slide_starts
        if given is not None and len(given) == len(titles) and all(i < pages for i in given):
            starts = given
        else:
            starts = _slide_starts(pdf, len(titles))
        _fix_internal_links(pdf, starts)
        _write_outline(pdf, titles, starts)
        _write_metadata(pdf, facts)
        out = io.BytesIO()
        pdf.save(out)
        return out.getvalue()


def size_warning(size: int, slides: int, per_slide_budget: int) -> str | None:
    """A warning when the PDF passes its budget (`per_slide_budget` bytes a slide; 0: none)."""
    budget = per_slide_budget * max(slides, 1)
    if per_slide_budget <= 0 or size <= budget:
        return None
    mib = 1024 * 1024
    return (
        f"the PDF is {size / mib:.1f} MiB, over its budget of {budget / mib:.1f} MiB "
        f"({per_slide_budget / mib:.1f} MiB a slide x {slides}): {RASTERISED_CSS_HINT}; "
        "drop or simplify those effects to shrink it"
    )
