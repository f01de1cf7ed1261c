"""Takes a page's source out of a model's answer: code fences and chatter around it are dropped.

Models wrap what they were asked for in prose ("Here is the updated slide:") and code fences,
sometimes several. The rule: the largest fenced block whose language fits the page kind (or has
none) wins; without fences, prose lines before the first line that looks like the page are
dropped. An answer that leaves nothing that looks like page source is `None`, never a page.
"""

from __future__ import annotations

import re

from deckyard.decks.source.deck_source import PageKind

_FENCE = re.compile(
    r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+#.-]*)[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_LANGS: dict[PageKind, frozenset[str]] = {
    PageKind.HTML: frozenset({"", "html", "htm", "xhtml", "svg"}),
    PageKind.MARKDOWN: frozenset({"", "md", "markdown", "mdx"}),
}
_HTML_START = re.compile(r"^\s*<(?:!doctype|[a-zA-Z][\w-]*|!--)", re.IGNORECASE)
_MD_START = re.compile(r"^\s*(?:#{1,6}\s|[-*+]\s|\d+[.)]\s|>|!\[|<[a-zA-Z]|\|)")
_HTML_TAG = re.compile(r"<[a-zA-Z][\w-]*[\s>/]")


def extract_page_source(answer: str, kind: PageKind) -> str | None:
    """The page source in `answer`, or None when there is none worth validating."""
    text = answer.replace("\r", "")
    blocks = [(m.group("lang").lower(), m.group("body")) for m in _FENCE.finditer(text)]
    fitting = [body for lang, body in blocks if lang in _LANGS[kind]]
    if fitting:
        return _usable(max(fitting, key=len).strip("\n"), kind)
    if blocks:
        return None
    return _usable(_strip_chatter(text, kind), kind)


def _strip_chatter(text: str, kind: PageKind) -> str:
    lines = text.strip().split("\n")
    start = _HTML_START if kind is PageKind.HTML else _MD_START
    first = next((i for i, line in enumerate(lines) if start.match(line)), None)
    if first is None:
        return ""
    body = lines[first:]
    if kind is PageKind.HTML:
        last = max(i for i, line in enumerate(body) if ">" in line)
        body = body[: last + 1]
    return "\n".join(body).strip()


def _usable(text: str, kind: PageKind) -> str | None:
    if not text.strip():
        return None
    if kind is PageKind.HTML and not _HTML_TAG.search(text):
        return None
    return text + "\n"
