"""Builds the PPTX (python-pptx): one slide per page at the deck's size, editable where it can be.

Each page comes with its PNG and its layout from the same render visit (`Needs.PAGE_LAYOUTS`).
A slide is rebuilt as shapes when everything visible on it is text, a list, a table, an image
or a code block and nothing else paints (`slide_mode`: no SVG, canvas or math, no transform,
background image, filter, shadow, partial opacity or generated content): text boxes at the
browser's boxes with its runs, bullets and line spacing; tables cell by cell; images cut out of
the PNG at their box (so they look as the browser drew them); filled or bordered boxes as
rectangles; code in its monospaced font with its colours. Any other slide is its full-slide PNG
as a picture, with the page's text behind it in transparent text boxes at the same places, so
it stays searchable and selectable. Speaker notes are the page's notes. `OutputFile.pages`
says, per slide, which it became and why.

Fonts are taken as named (`pptx_text`); a viewer without them substitutes, which is the usual
reason an editable slide's lines break elsewhere than in the PNG.
"""

from __future__ import annotations

import io
from enum import StrEnum
from typing import Any

from PIL import Image
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE
from pptx.enum.text import MSO_ANCHOR, MSO_AUTO_SIZE, PP_ALIGN
from pptx.oxml.ns import qn
from pptx.oxml.xmlchemy import OxmlElement
from pptx.shapes.picture import Picture
from pptx.slide import Slide
from pptx.table import _Cell
from pptx.text.text import TextFrame

from deckyard.outputs.interface import DeckInput, OutputFile, PageInput
from deckyard.outputs.pptx_text import add_run, css_color, px

BLANK_LAYOUT = 6
"""The default template's blank slide layout (no placeholders)."""
_ALIGN = {
    "center": PP_ALIGN.CENTER,
    "right": PP_ALIGN.RIGHT,
    "end": PP_ALIGN.RIGHT,
    "justify": PP_ALIGN.JUSTIFY,
}
_BULLETS = {"disc": "\u2022", "circle": "\u25e6", "square": "\u25aa"}
_NUMBERING = {
    "decimal": "arabicPeriod",
    "lower-alpha": "alphaLcPeriod",
    "lower-latin": "alphaLcPeriod",
    "upper-alpha": "alphaUcPeriod",
    "upper-latin": "alphaUcPeriod",
    "lower-roman": "romanLcPeriod",
    "upper-roman": "romanUcPeriod",
}
_MAX_DESCRIPTION = 2000
_WRAP_SLACK = 1.04
"""Text boxes are this much wider than the browser's, so a line that just fitted there does
not wrap in a viewer whose font metrics differ slightly."""


class SlideMode(StrEnum):
    """How a page became a slide."""

    EDITABLE = "editable"
    IMAGE = "image"


def slide_mode(layout: dict[str, Any] | None) -> tuple[SlideMode, str]:
    """Whether a page with `layout` can be rebuilt as editable shapes, and why (or why not)."""
    if not layout:
        return SlideMode.IMAGE, "the render returned no layout for the page"
    if layout.get("truncated"):
        return SlideMode.IMAGE, "the page has more elements or text than a layout describes"
    blockers = [str(b) for b in layout.get("blockers") or []]
    if blockers:
        more = f" and {len(blockers) - 3} more" if len(blockers) > 3 else ""
        return SlideMode.IMAGE, "it paints what shapes cannot: " + "; ".join(blockers[:3]) + more
    kinds = sorted({str(i.get("kind")) for i in layout.get("items") or []} - {"box"})
    if not kinds:
        return SlideMode.EDITABLE, "empty page"
    return SlideMode.EDITABLE, "only " + ", ".join(kinds)


def _box(item: dict[str, Any]) -> tuple[float, float, float, float]:
    x, y, w, h = (float(v) for v in item.get("box") or (0, 0, 0, 0))
    return x, y, max(w, 1.0), max(h, 1.0)


def _frame(frame: TextFrame, item: dict[str, Any], *, wrap: bool) -> None:
    left, top, right, bottom = (float(v) for v in item.get("padding") or (0, 0, 0, 0))
    frame.margin_left, frame.margin_top = px(left), px(top)
    frame.margin_right, frame.margin_bottom = px(right), px(bottom)
    frame.word_wrap = wrap
    frame.auto_size = MSO_AUTO_SIZE.NONE
    frame.vertical_anchor = MSO_ANCHOR.TOP


def _bullet(item: dict[str, Any], frame: TextFrame, indent: float) -> None:
    """Make the frame's paragraph a list item with the browser's marker."""
    marker = item.get("marker") or {}
    pPr = frame.paragraphs[0]._p.get_or_add_pPr()
    pPr.set("marL", str(px(indent)))
    pPr.set("indent", str(-px(indent)))
    kind = str(marker.get("type", "disc"))
    if kind in _NUMBERING:
        numbered = OxmlElement("a:buAutoNum")
        numbered.set("type", _NUMBERING[kind])
        numbered.set("startAt", str(int(marker.get("number") or 1)))
        pPr.append(numbered)
    else:
        char = OxmlElement("a:buChar")
        char.set("char", _BULLETS.get(kind, _BULLETS["disc"]))
        pPr.append(char)


def _runs(item: dict[str, Any], *, keep_spaces: bool) -> list[dict[str, Any]]:
    runs = [dict(r) for r in item.get("runs") or [] if r.get("text")]
    if runs and not keep_spaces:
        runs[0]["text"] = str(runs[0]["text"]).lstrip()
        runs[-1]["text"] = str(runs[-1]["text"]).rstrip()
    return runs


def _text(slide: Slide, item: dict[str, Any], *, hidden: bool = False) -> None:
    """A text block (or code block) as a text box at its box, with its runs."""
    code = item.get("kind") == "code"
    runs = _runs(item, keep_spaces=code)
    if not runs:
        return
    x, y, w, h = _box(item)
    size = float(runs[0].get("size") or 16)
    marker = bool(item.get("marker")) and not hidden
    indent = size * 1.4 if marker else 0.0
    line = item.get("lineHeight")
    one_line = isinstance(line, int | float) and h < 1.5 * float(line)
    width = w + indent if code or one_line else (w + indent) * _WRAP_SLACK
    shape = slide.shapes.add_textbox(px(x - indent), px(y), px(width), px(h))
    frame = shape.text_frame
    _frame(frame, item, wrap=not code and not one_line)
    paragraph = frame.paragraphs[0]
    paragraph.alignment = _ALIGN.get(str(item.get("align")), PP_ALIGN.LEFT)
    if isinstance(line, int | float) and line > 0:
        paragraph.line_spacing = px(float(line))
    if marker:
        _bullet(item, frame, indent)
    for run in runs:
        add_run(paragraph, run, str(run["text"]), hidden=hidden)


_CELL_LINES = ("a:lnL", "a:lnR", "a:lnT", "a:lnB")
_AFTER_LINES = (
    *("a:lnTlToBr", "a:lnBlToTr", "a:cell3D", "a:noFill", "a:solidFill", "a:gradFill"),
    *("a:blipFill", "a:pattFill", "a:grpFill", "a:headers", "a:extLst"),
)


def _cell_borders(cell: _Cell, borders: list[Any]) -> None:
    """The cell's borders as the browser drew them (`a:lnL/R/T/B`)."""
    tcPr = cell._tc.get_or_add_tcPr()
    for n, (name, border) in enumerate(zip(_CELL_LINES, borders, strict=False)):
        width, colour = float(border[0] or 0), css_color(border[1])
        if width <= 0 or colour is None:
            continue  # a neighbour's border may draw this edge; "none" must not erase it
        line = OxmlElement(name)
        line.set("w", str(px(width)))
        fill = OxmlElement("a:solidFill")
        rgb = OxmlElement("a:srgbClr")
        rgb.set("val", str(colour[0]))
        fill.append(rgb)
        line.append(fill)
        tcPr.insert_element_before(line, *_CELL_LINES[n + 1 :], *_AFTER_LINES)


def _table(slide: Slide, item: dict[str, Any]) -> None:
    rows: list[list[dict[str, Any]]] = item.get("rows") or []
    columns = max((len(r) for r in rows), default=0)
    if not rows or not columns:
        return
    x, y, w, h = _box(item)
    table = slide.shapes.add_table(len(rows), columns, px(x), px(y), px(w), px(h)).table
    table.first_row = False
    table.horz_banding = False
    for j, head in enumerate(rows[0]):
        table.columns[j].width = px(_box(head)[2])
    for i, row in enumerate(rows):
        table.rows[i].height = px(max(_box(c)[3] for c in row))
        for j, data in enumerate(row):
            cell = table.cell(i, j)
            left, top, right, bottom = (float(v) for v in data.get("padding") or (0, 0, 0, 0))
            cell.margin_left, cell.margin_top = px(left), px(top)
            cell.margin_right, cell.margin_bottom = px(right), px(bottom)
            fill = css_color(data.get("fill"))
            if fill is not None:
                cell.fill.solid()  # type: ignore[no-untyped-call]
                cell.fill.fore_color.rgb = fill[0]
            else:
                cell.fill.background()  # type: ignore[no-untyped-call]
            _cell_borders(cell, list(data.get("borders") or []))
            paragraph = cell.text_frame.paragraphs[0]
            paragraph.alignment = _ALIGN.get(str(data.get("align")), PP_ALIGN.LEFT)
            for run in _runs(data, keep_spaces=False):
                add_run(paragraph, run, str(run["text"]))


def _rectangle(slide: Slide, item: dict[str, Any], page: tuple[float, float, str]) -> None:
    """A box that paints a fill or a border, unless it is the slide's own background."""
    x, y, w, h = _box(item)
    width, height, background = page
    fill = css_color(item.get("fill"))
    line = css_color(item.get("line")) if float(item.get("lineWidth") or 0) > 0 else None
    covers = x <= 0.5 and y <= 0.5 and w >= width - 1 and h >= height - 1
    if covers and line is None and (fill is None or item.get("fill") == background):
        return
    rounded = float(item.get("radius") or 0) > 0
    kind = MSO_SHAPE.ROUNDED_RECTANGLE if rounded else MSO_SHAPE.RECTANGLE
    shape = slide.shapes.add_shape(kind, px(x), px(y), px(w), px(h))
    style = shape._element.find(qn("p:style"))
    if style is not None:
        shape._element.remove(style)
    if kind == MSO_SHAPE.ROUNDED_RECTANGLE:
        shape.adjustments[0] = min(0.5, float(item.get("radius") or 0) / max(min(w, h), 1.0))
    if fill is not None and fill[1] > 0:
        shape.fill.solid()
        shape.fill.fore_color.rgb = fill[0]
    else:
        shape.fill.background()
    if line is not None:
        shape.line.color.rgb = line[0]
        shape.line.width = px(float(item["lineWidth"]))
    else:
        shape.line.fill.background()


def _describe(picture: Picture, text: str) -> None:
    """Give a picture its description (alt text), as its `p:cNvPr` `descr`."""
    properties = picture._element.find(f"{qn('p:nvPicPr')}/{qn('p:cNvPr')}")
    if properties is not None:
        properties.set("descr", text[:_MAX_DESCRIPTION])


def _image(slide: Slide, item: dict[str, Any], png: Image.Image, size: tuple[int, int]) -> None:
    """An image as the browser drew it: the PNG cut at its box (clipped to the slide)."""
    x, y, w, h = _box(item)
    left, top = max(x, 0.0), max(y, 0.0)
    right, bottom = min(x + w, float(size[0])), min(y + h, float(size[1]))
    if right - left < 1 or bottom - top < 1:
        return
    scale = png.width / size[0]
    cut = png.crop(
        (round(left * scale), round(top * scale), round(right * scale), round(bottom * scale))
    )
    buffer = io.BytesIO()
    cut.save(buffer, "PNG")
    buffer.seek(0)
    picture = slide.shapes.add_picture(
        buffer, px(left), px(top), px(right - left), px(bottom - top)
    )
    alt = str(item.get("alt") or "")
    if alt:
        _describe(picture, alt)


def _text_layer(slide: Slide, items: list[dict[str, Any]]) -> list[str]:
    """The page's text as transparent text boxes at its places; returns the text, in order."""
    texts: list[str] = []
    for item in items:
        blocks = [item] if item.get("kind") in ("text", "code") else []
        if item.get("kind") == "table":
            blocks = [cell for row in item.get("rows") or [] for cell in row]
        for block in blocks:
            _text(slide, {**block, "kind": item.get("kind")}, hidden=True)
            texts.append("".join(str(r.get("text", "")) for r in block.get("runs") or []))
    return [t.strip() for t in texts if t.strip()]


def _page_slide(slide: Slide, page: PageInput, deck: DeckInput, mode: SlideMode) -> None:
    layout = page.layout or {}
    items: list[dict[str, Any]] = list(layout.get("items") or [])
    size = (deck.width, deck.height)
    background = str(layout.get("background") or "rgb(255, 255, 255)")
    with Image.open(io.BytesIO(page.png)) as png:
        png.load()
        if mode is SlideMode.IMAGE:
            texts = _text_layer(slide, items)
            buffer = io.BytesIO(page.png)
            picture = slide.shapes.add_picture(
                buffer, px(0), px(0), px(deck.width), px(deck.height)
            )
            _describe(picture, " ".join(texts))
            return
        fill = css_color(background)
        if fill is not None:
            slide.background.fill.solid()
            slide.background.fill.fore_color.rgb = fill[0]
        for item in items:
            kind = item.get("kind")
            if kind == "box":
                _rectangle(slide, item, (deck.width, deck.height, background))
            elif kind in ("text", "code"):
                _text(slide, item)
            elif kind == "table":
                _table(slide, item)
            elif kind == "image":
                _image(slide, item, png, size)


def build_pptx(deck: DeckInput) -> OutputFile:
    """The deck as a PPTX, and the per-slide report (`page`, `mode`, `why`)."""
    presentation = Presentation()
    presentation.slide_width = px(deck.width)
    presentation.slide_height = px(deck.height)
    core = presentation.core_properties
    core.title = deck.title
    core.author = deck.author or ""
    core.language = deck.lang
    layout = presentation.slide_layouts[BLANK_LAYOUT]
    report: list[dict[str, Any]] = []
    for page in deck.pages:
        slide = presentation.slides.add_slide(layout)
        mode, why = slide_mode(page.layout)
        _page_slide(slide, page, deck, mode)
        if page.notes:
            slide.notes_slide.notes_text_frame.text = page.notes
        report.append({"page": page.name, "mode": mode.value, "why": why})
    out = io.BytesIO()
    presentation.save(out)
    return OutputFile(out.getvalue(), report)
