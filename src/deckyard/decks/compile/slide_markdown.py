"""Renders one Markdown slide to an HTML document: directives, backgrounds, code, math, notes.

markdown-it-py (CommonMark plus tables, strikethrough, footnotes, `:::` containers and `$…$` /
`$$…$$` math from mdit-py-plugins) parses the slide; Pygments highlights code fences and
latex2mathml turns math into MathML, both here at compile time, so the page needs no script.
Slidev's icon tags become inline SVG (`decks/icons.py`). Marp's image keywords
(`![bg left:40%](…)`, `![w:300](…)`) and the slide's directives
(`markdown_directives.py`) become classes and elements the built-in stylesheet lays out:
`.dy-bg` (backgrounds), `.dy-header`, `.dy-footer`, `.dy-content`, and `.dy-notes`, the speaker
notes, which are `hidden` so they never show on a rendered slide.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import emoji
import latex2mathml.converter
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from mdit_py_plugins.container import container_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.footnote import footnote_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from deckyard.decks.compile.markdown import annotate_tokens
from deckyard.decks.compile.slide_math import (
    aligned_cells,
    math_interrupts_paragraphs,
    mathml_latex,
)
from deckyard.decks.compile.slidev_code import code_block, fence_info
from deckyard.decks.compile.slidev_layouts import (
    render_layout,
    slidev_layout,
    slidev_page,
    split_slots,
)
from deckyard.decks.compile.slidev_toc import render_toc
from deckyard.decks.diagrams import MERMAID_CLASS, mermaid_available
from deckyard.decks.icons import inline_icons
from deckyard.decks.source.markdown_directives import (
    SLIDEV_DIRECTIVE,
    ImageOptions,
    attribute_directives,
    image_options,
    split_comments,
)
from deckyard.outputs.interface import NOTES_CLASS

CODE_CLASS = "dy-code"
LEAD_LAYOUTS = frozenset({"cover", "intro", "section", "end", "statement", "fact", "quote"})
_CSS_VALUE = re.compile(r"^[^;{}<>\\]*$")
_CLASS_WORD = re.compile(r"^[A-Za-z_][\w-]*$")
_RIGHT_SLOT = re.compile(r"^::right::\s*$", re.MULTILINE)
_SLOT_LINE = re.compile(r"^::(left|default)::\s*$")
_FIT = re.compile(r"<!--\s*fit\s*-->", re.IGNORECASE)
_FORMATTER = HtmlFormatter(nowrap=True)
_SLIDEV_MERMAID = (
    f"<style>pre.{MERMAID_CLASS} {{ font-family: 'trebuchet ms', verdana, arial, sans-serif; "
    "font-size: 16px; }</style>"
)
"""A diagram of a Slidev slide, in Mermaid's own default font and size, as Slidev draws it."""
_STYLE_DIRECTIVES = {
    "backgroundColor": "background-color",
    "color": "color",
    "backgroundImage": "background-image",
    "backgroundPosition": "background-position",
    "backgroundRepeat": "background-repeat",
    "backgroundSize": "background-size",
}


def _highlight(code: str, lang: str, _attrs: str) -> str:
    name = lang.split("{", 1)[0].strip()
    if name.lower() == "mermaid" and mermaid_available():
        return f'<pre class="{MERMAID_CLASS}">{html.escape(code)}</pre>\n'
    try:
        lexer = get_lexer_by_name(name) if name else None
    except ClassNotFound:
        lexer = None
    body = highlight(code, lexer, _FORMATTER) if lexer else html.escape(code)
    language = f' data-lang="{html.escape(name)}"' if name else ""
    return f'<pre class="{CODE_CLASS}"{language}><code>{body}</code></pre>\n'


def _slidev_fence(self: Any, tokens: list[Token], idx: int, _options: Any, _env: Any) -> str:
    """A fence of a Slidev slide as Slidev's code block (`slidev_code.py`)."""
    token = tokens[idx]
    info = fence_info(token.info)
    if info.lang.lower() == "mermaid" and mermaid_available():
        return _highlight(token.content, info.lang, "")
    return code_block(token.content, info)


def _math(latex: str, options: dict[str, Any]) -> str:
    display = "block" if options.get("display_mode") else "inline"
    try:
        mathml = latex2mathml.converter.convert(
            mathml_latex(latex, display=display == "block"), display=display
        )
        return aligned_cells(str(mathml))
    except Exception:  # latex2mathml raises many types; the scan already warned
        return f'<code class="dy-math-error">{html.escape(latex)}</code>'


def _container_render(self: Any, tokens: list[Token], idx: int, _options: Any, _env: Any) -> str:
    token = tokens[idx]
    if token.nesting != 1:
        return "</div>\n"
    words = [w for w in token.info.split() if _CLASS_WORD.match(w)]
    return f'<div class="{html.escape(" ".join(words))}">\n'


def _emoji_rule(state: StateCore) -> None:
    """GitHub/Slack shortcodes (`:+1:`, `:tada:`) in text become emoji, as in Marp and Slidev.

    Only text tokens change, so code spans and fences keep their colons; a shortcode the
    `emoji` package does not know stays as written (the source scan warns about it).
    """
    for token in state.tokens:
        for child in token.children or []:
            if child.type == "text" and ":" in child.content:
                child.content = emoji.emojize(child.content, language="alias")


@lru_cache(maxsize=8)
def _parser(allow_html: bool, extensions: tuple[str, ...], slidev: bool = False) -> MarkdownIt:
    """The slide parser; Slidev's (`slidev`) draws code blocks as Slidev does, and lets display
    math (`$$`) start right under a paragraph's line, as Slidev's KaTeX plugin does."""
    md = MarkdownIt("commonmark", {"html": allow_html, "highlight": _highlight})
    md.enable(["table", "strikethrough", *extensions])
    md.use(footnote_plugin)
    md.core.ruler.push("dy_emoji", _emoji_rule)
    md.use(dollarmath_plugin, renderer=_math, double_inline=True, allow_labels=False)
    md.use(
        container_plugin,
        name="div",
        validate=lambda params, *_: bool(params.strip()),
        render=_container_render,
    )
    if slidev:
        md.add_render_rule("fence", _slidev_fence)
        math_interrupts_paragraphs(md)
    return md


def _css_value(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    return text if text and _CSS_VALUE.match(text) else None


def _class_words(value: Any) -> list[str]:
    words = value if isinstance(value, list) else str(value or "").split()
    return [str(w) for w in words if _CLASS_WORD.match(str(w))]


def _background_images(tokens: list[Token]) -> list[tuple[str, ImageOptions]]:
    """Take Marp's `![bg …](…)` images out of the flow; set `w:`/`h:` on the others."""
    found: list[tuple[str, ImageOptions]] = []
    for i, token in enumerate(tokens):
        if token.type != "inline" or not token.children:
            continue
        kept: list[Token] = []
        for child in token.children:
            if child.type != "image":
                kept.append(child)
                continue
            options = image_options(child.content)
            if options.background:
                found.append((str(child.attrGet("src") or ""), options))
                continue
            child.content = options.alt
            child.children = [Token("text", "", 0, content=options.alt)]
            style = [f"width:{options.width}"] if options.width else []
            style += [f"height:{options.height}"] if options.height else []
            style += [f"filter:{' '.join(options.filters)}"] if options.filters else []
            if style:
                child.attrSet("style", ";".join(style))
            kept.append(child)
        if all(c.type != "image" and not c.content.strip() for c in kept):
            kept = []
            if i > 0 and tokens[i - 1].type == "paragraph_open":
                tokens[i - 1].hidden = True
                tokens[i + 1].hidden = True
        token.children = kept
    return found


def _background_html(images: list[tuple[str, ImageOptions]], directives: Mapping[str, Any]) -> str:
    entries = list(images)
    for key in ("background", "image"):
        value = directives.get(key)
        is_image_layout = key == "image" and directives.get("layout") == "image"
        if isinstance(value, str) and (key == "background" or is_image_layout):
            entries.append((value, image_options("bg")))
    if not entries:
        return ""
    vertical = any(o.vertical for _, o in entries)
    figures = []
    for src, options in entries:
        style = [f"background-image:url({json.dumps(src)})"]
        style.append(f"background-size:{options.size or 'cover'}")
        if options.filters:
            style.append(f"filter:{' '.join(options.filters)}")
        figures.append(f'<figure style="{html.escape(";".join(style))}"></figure>')
    direction = " dy-bg-vertical" if vertical else ""
    return f'<div class="dy-bg{direction}">{"".join(figures)}</div>\n'


def _split_layout(
    images: list[tuple[str, ImageOptions]], directives: Mapping[str, Any]
) -> tuple[str | None, str]:
    layout = str(directives.get("layout") or "")
    image = directives.get("image")
    if layout in ("image-left", "image-right") and isinstance(image, str):
        images.append((image, image_options(f"bg {layout.removeprefix('image-')}")))
        return layout.removeprefix("image-"), "50%"
    for _, options in images:
        if options.split:
            return options.split, options.split_size
    return None, "50%"


def _notes_html(notes: list[str]) -> str:
    if not notes:
        return ""
    paragraphs = "".join(f"<p>{html.escape(note)}</p>" for note in notes)
    return f'<aside class="{NOTES_CLASS}" hidden>{paragraphs}</aside>\n'


def _columns(text: str) -> tuple[str, str] | None:
    """Slidev's `two-cols` halves, each the whole text with the other half's lines blanked."""
    match = _RIGHT_SLOT.search(text)
    if match is None:
        return None
    split = text.count("\n", 0, match.start())
    lines = text.split("\n")
    left = [("" if i >= split or _SLOT_LINE.match(s) else s) for i, s in enumerate(lines)]
    right = [("" if i <= split else s) for i, s in enumerate(lines)]
    return "\n".join(left), "\n".join(right)


def _body(md: MarkdownIt, text: str) -> tuple[str, list[tuple[str, ImageOptions]]]:
    tokens = md.parse(_FIT.sub("", text))
    images = _background_images(tokens)
    annotate_tokens(tokens)
    return str(md.renderer.render(tokens, md.options, {})), images


def _slidev_slide(
    md: MarkdownIt, text: str, directives: Mapping[str, Any], notes: list[str], allow_html: bool
) -> str | None:
    """A slide of a Slidev deck in Slidev's own layout and slide container (`slidev_layouts`).

    None when the page does not say it is Slidev's, or the vendored layouts are missing.
    """
    canvas = directives.get(SLIDEV_DIRECTIVE)
    if not isinstance(canvas, dict):
        return None
    layout = slidev_layout(str(directives.get("layout") or "default")) or slidev_layout("default")
    if layout is None:
        return None
    text = inline_icons(text, allow_html=allow_html, icon_class="slidev-icon")
    toc = canvas.get("toc")
    if isinstance(toc, list):
        text = render_toc(text, toc, int(canvas.get("slide") or 0), md.renderInline)
    slots = {name: _body(md, part)[0] for name, part in split_slots(text).items()}
    try:
        width, height = float(canvas["width"]), float(canvas["height"])
        scale = float(canvas["scale"])
    except (KeyError, TypeError, ValueError):
        return None
    content = render_layout(layout, slots, directives)
    dark = " dark" if canvas.get("dark") else ""
    # Slidev's `bg-main` (white, #121212 when dark) under the canvas too: its scaled edge
    # may leave a sub-pixel row of the slide showing.
    background = "#121212" if dark else "#fff"
    return (
        f"<!DOCTYPE html><html><head>{_SLIDEV_MERMAID}"
        f"<style>body {{ background-color: {background} }}</style></head>"
        f'<body class="dy-slidev{dark}">\n'
        f"{slidev_page(content, width, height, scale)}\n{_notes_html(notes)}</body></html>\n"
    )


def render_slide(text: str, *, allow_html: bool, extensions: tuple[str, ...]) -> str:
    """The Markdown slide `text` as an HTML document whose body is the slide's content.

    The body's classes become the slide's classes; its `<style>` (scoped to the slide by the
    compiler) carries the colour and background directives. A slide of a Slidev deck (its
    page says so) is laid out by Slidev's own layout instead (`_slidev_slide`).
    """
    comments = split_comments(text)
    from_attributes, _ignored = attribute_directives(comments.attributes)
    directives = {**from_attributes, **comments.effective()}
    md = _parser(allow_html, extensions, SLIDEV_DIRECTIVE in directives)
    slidev = _slidev_slide(md, comments.text, directives, comments.notes, allow_html)
    if slidev is not None:
        return slidev
    layout = str(directives.get("layout") or "")
    text = inline_icons(comments.text, allow_html=allow_html)
    halves = _columns(text) if layout == "two-cols" else None
    if halves is None:
        content, images = _body(md, text)
    else:
        left, left_images = _body(md, halves[0])
        right, right_images = _body(md, halves[1])
        images = left_images + right_images
        content = f'<div class="dy-col">{left}</div><div class="dy-col">{right}</div>'
    split, split_size = _split_layout(images, directives)
    classes = ["dy-md", *_class_words(directives.get("class"))]
    if layout:
        classes += _class_words(f"dy-layout-{layout}")
        classes += ["lead"] if layout in LEAD_LAYOUTS else []
    if directives.get("paginate") is True:
        classes.append("dy-paginate")
    if split:
        classes += ["dy-split", f"dy-split-{split}"]
    declarations = [
        f"{prop}: {value}"
        for key, prop in _STYLE_DIRECTIVES.items()
        if (value := _css_value(directives.get(key, ""))) is not None
    ]
    if split:
        declarations.append(f"--dy-split: {split_size}")
    style = f"<style>body {{ {'; '.join(declarations)} }}</style>" if declarations else ""
    parts = [_background_html(images, directives)]
    for key in ("header", "footer"):
        value = directives.get(key)
        if isinstance(value, str | int | float) and str(value).strip():
            inline = md.renderInline(str(value))
            parts.append(f'<{key} class="dy-{key}">{inline}</{key}>\n')
    layout_class = " dy-cols" if halves is not None else ""
    parts.append(f'<div class="dy-content{layout_class}">\n{content}</div>\n')
    parts.append(_notes_html(comments.notes))
    return (
        f"<!DOCTYPE html><html><head>{style}</head>"
        f'<body class="{html.escape(" ".join(dict.fromkeys(classes)))}">\n'
        f"{''.join(parts)}</body></html>\n"
    )


def slide_notes(text: str) -> list[str]:
    """The speaker notes of the Markdown slide `text`, in order."""
    return split_comments(text).notes
