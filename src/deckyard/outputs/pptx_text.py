"""Text for the PPTX export: CSS colours and font lists to DrawingML, and styled runs.

A run keeps the browser's size, weight, style, decoration, colour and font. The font is the
first family the page named that is not generic (a generic one is the font Debian's
fontconfig gives it, the Noto families `scripts/setup` installs); a run holding CJK
characters also gets an East Asian typeface (`a:ea`), the first CJK family of its list, so
PowerPoint and LibreOffice draw it with a CJK font instead of guessing.
"""

from __future__ import annotations

import re
from typing import Any

from pptx.dml.color import RGBColor
from pptx.oxml.ns import qn
from pptx.oxml.xmlchemy import OxmlElement
from pptx.text.text import _Paragraph, _Run
from pptx.util import Emu, Pt

EMU_PER_PX = 9525
"""English Metric Units per CSS pixel (96 px an inch)."""
GENERIC_FONTS = {
    "sans-serif": "Noto Sans",
    "system-ui": "Noto Sans",
    "serif": "Noto Serif",
    "monospace": "Noto Sans Mono",
}
DEFAULT_EA_FONT = "Noto Sans CJK JP"
BLACK = RGBColor(0, 0, 0)  # type: ignore[no-untyped-call]
_CJK = re.compile(
    r"[\u3000-\u303f\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
_CJK_FONT = re.compile(r"CJK|\b(JP|SC|TC|HK|KR)\b|Gothic|Mincho|Hei|Song|Ming|Kai", re.I)
_NOT_LATIN = re.compile(r"CJK|Emoji|Symbol", re.I)
_RGBA = re.compile(r"rgba?\(([^)]*)\)")


def px(value: float) -> Emu:
    """CSS pixels as EMU."""
    return Emu(round(value * EMU_PER_PX))


def font_pt(size_px: float) -> Pt:
    """A CSS font size in pixels as points (0.75 pt a pixel), to the hundredth."""
    return Pt(round(size_px * 0.75 * 100) / 100)


def css_color(value: Any) -> tuple[RGBColor, float] | None:
    """`rgb(...)`/`rgba(...)` as a colour and its alpha; None for anything else."""
    found = _RGBA.search(value) if isinstance(value, str) else None
    if found is None:
        return None
    parts = [p for p in re.split(r"[\s,/]+", found.group(1)) if p]
    try:
        r, g, b = (max(0, min(255, round(float(p)))) for p in parts[:3])
        alpha = float(parts[3]) if len(parts) > 3 else 1.0
    except (ValueError, TypeError):
        return None
    return RGBColor(r, g, b), alpha  # type: ignore[no-untyped-call]


def has_cjk(text: str) -> bool:
    """Whether `text` holds Chinese, Japanese or Korean characters."""
    return _CJK.search(text) is not None


def latin_font(families: list[str]) -> str:
    """The typeface for a run of `families` (a computed `font-family`, in order)."""
    for family in families:
        if family in GENERIC_FONTS:
            return GENERIC_FONTS[family]
        if family and not _NOT_LATIN.search(family):
            return family
    return GENERIC_FONTS["sans-serif"]


def east_asian_font(families: list[str]) -> str:
    """The East Asian typeface for a run of `families`: its first CJK family, else Noto's."""
    for family in families:
        if _CJK_FONT.search(family):
            return family
    return DEFAULT_EA_FONT


def _set_east_asian(run: _Run, typeface: str) -> None:
    """Give the run an `a:ea` typeface (python-pptx has no property for it)."""
    rPr = run._r.get_or_add_rPr()
    for old in rPr.findall(qn("a:ea")):
        rPr.remove(old)
    ea = OxmlElement("a:ea")
    ea.set("typeface", typeface)
    rPr.insert_element_before(
        ea, "a:cs", "a:sym", "a:hlinkClick", "a:hlinkMouseOver", "a:rtl", "a:extLst"
    )


TEXT_LAYER_ALPHA = "1000"
"""The text layer's opacity (1%, in thousandths of a percent): it lies behind the slide's
picture anyway; fully transparent text is left out of LibreOffice's PDF, so not searchable."""


def _make_transparent(run: _Run) -> None:
    """Draw the run's text all but transparent (searchable and selectable, never seen)."""
    rPr = run._r.get_or_add_rPr()
    fill = rPr.find(qn("a:solidFill"))
    colour = fill[0] if fill is not None and len(fill) else None
    if colour is None:
        return
    alpha = OxmlElement("a:alpha")
    alpha.set("val", TEXT_LAYER_ALPHA)
    colour.append(alpha)


def add_run(
    paragraph: _Paragraph, style: dict[str, Any], text: str, *, hidden: bool = False
) -> None:
    """Append `text` to `paragraph` styled as the layout run `style` says.

    Line breaks in `text` become `a:br`; `hidden` draws the text (all but) transparent.
    """
    for n, line in enumerate(text.split("\n")):
        if n:
            paragraph.add_line_break()  # type: ignore[no-untyped-call]
        if not line:
            continue
        run = paragraph.add_run()
        run.text = line
        font = run.font
        font.size = font_pt(float(style.get("size") or 16))
        font.bold = bool(style.get("bold"))
        font.italic = bool(style.get("italic"))
        if style.get("underline"):
            font.underline = True
        families = [str(f) for f in style.get("font") or []]
        font.name = latin_font(families)
        colour = css_color(style.get("color"))
        font.color.rgb = colour[0] if colour else BLACK
        if style.get("strike"):
            run._r.get_or_add_rPr().set("strike", "sngStrike")
        link = style.get("link")
        if isinstance(link, str) and link.startswith(("http://", "https://")) and not hidden:
            run.hyperlink.address = link
        if has_cjk(line):
            _set_east_asian(run, east_asian_font(families))
        if hidden:
            _make_transparent(run)
