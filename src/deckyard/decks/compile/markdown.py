"""Renders a Markdown page to HTML with markdown-it-py, keeping the Markdown line of each reference.

Compile errors must name the line in the file the author wrote, not in the generated HTML. So
images and links get a `data-deckyard-line` attribute, and raw HTML (blocks and inline tags) is
preceded by an empty `<deckyard-line n="…">` marker: an element after a marker is on the marker's
Markdown line plus its own distance from the marker in the HTML, because raw HTML passes through
verbatim. The compiler reads both and removes them.
"""

from __future__ import annotations

from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

LINE_ATTR = "data-deckyard-line"
MARKER_TAG = "deckyard-line"


def _marker(line: int) -> str:
    return f'<{MARKER_TAG} n="{line}"></{MARKER_TAG}>'


@lru_cache(maxsize=8)
def _parser(html: bool, extensions: tuple[str, ...]) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": html})
    if extensions:
        md.enable(list(extensions))
    return md


def _annotate_inline(token: Token) -> None:
    if token.map is None or not token.children:
        return
    line = token.map[0] + 1
    for child in token.children:
        if child.type in ("image", "link_open"):
            child.attrSet(LINE_ATTR, str(line))
        elif child.type == "html_inline":
            child.content = _marker(line) + child.content
            line += child.content.count("\n")
        elif child.type in ("softbreak", "hardbreak"):
            line += 1


def annotate_tokens(tokens: list[Token]) -> None:
    """Mark images, links and raw HTML in `tokens` with their Markdown line (see the module)."""
    for token in tokens:
        if token.type == "inline":
            _annotate_inline(token)
        elif token.type == "html_block" and token.map is not None:
            token.content = _marker(token.map[0] + 1) + token.content


def render_markdown(text: str, *, html: bool, extensions: tuple[str, ...]) -> str:
    """`text` rendered as an HTML fragment, annotated with Markdown line numbers.

    `html` allows raw HTML in the Markdown; `extensions` names markdown-it rules to enable on
    top of CommonMark (for example `table`, `strikethrough`).
    """
    md = _parser(html, extensions)
    tokens = md.parse(text)
    annotate_tokens(tokens)
    return str(md.renderer.render(tokens, md.options, {}))
