"""Finds the comment directives, speaker notes and slide attributes in one slide's Markdown.

The conventions are Marp's (a comment whose YAML keys are all directives, `_`-prefixed keys
apply to this slide only; any other comment is a speaker note), reveal.js's (`<!-- .slide: … -->`
attributes, everything after a `Note:` paragraph is notes) and Slidev's (comments are notes).
Comments are found with markdown-it's block parser, so a `<!-- … -->` inside a code fence stays
code. Their lines are blanked rather than removed: the rest of the slide keeps its line numbers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml
from markdown_it import MarkdownIt

LOCAL_DIRECTIVES = frozenset(
    {
        "paginate",
        "header",
        "footer",
        "class",
        "backgroundColor",
        "backgroundImage",
        "backgroundPosition",
        "backgroundRepeat",
        "backgroundSize",
        "color",
        "layout",
        "background",
        "image",
    }
)
GLOBAL_DIRECTIVES = frozenset(
    {
        "marp",
        "theme",
        "style",
        "headingDivider",
        "size",
        "math",
        "title",
        "description",
        "author",
        "image",
        "keywords",
        "url",
        "lang",
    }
)
SOURCE_DIRECTIVE = "dySource"
"""Where a slide of a one-file deck starts (`talk.md:42`), written into its page by Deckyard so
a compile problem of the page can name the line of the file the author wrote."""
SLIDEV_DIRECTIVE = "dySlidev"
"""Written by Deckyard into each page of a Slidev deck that Slidev's styles render: the canvas
(`{"width": 980, "height": 551.25, "scale": 1.96, "dark": true}`); see `slidev_deck.py`."""
_COMMENT = re.compile(r"^\s*<!--(?P<body>.*?)-->\s*$", re.DOTALL)
_SLIDE_ATTRS = re.compile(r"^\s*\.slide:\s*(?P<attrs>.*)$", re.DOTALL)
_ELEMENT_ATTRS = re.compile(r"^\s*\.element:", re.DOTALL)
_ATTR = re.compile(r"""([A-Za-z_:][\w:.-]*)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'=<>`]+))?""")
_NOTE_START = re.compile(r"^\s*Notes?:\s?", re.IGNORECASE)
_FIT = re.compile(r"^\s*fit\s*$", re.IGNORECASE)
_HASH_VALUE = re.compile(r"^(\s*_?[A-Za-z][\w-]*\s*:\s*)(#[^\n]*)$", re.MULTILINE)


@dataclass
class SlideComments:
    """What the comments of one slide say, and its text with those comments blanked.

    `local` holds directives that apply from this slide on (Marp's inherited ones), `spot`
    those for this slide only (`_`-prefixed), `global_` deck-wide ones (`theme`, `size`).
    `notes` are the speaker notes in order; `problems` are `(line, message)` pairs, lines
    counted in the slide's text from 1.
    """

    text: str
    local: dict[str, Any] = field(default_factory=dict)
    spot: dict[str, Any] = field(default_factory=dict)
    global_: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)

    def effective(self) -> dict[str, Any]:
        """This slide's own directives: inherited ones overridden by `_`-prefixed ones."""
        return {**self.local, **self.spot}

    def source(self) -> tuple[str, int] | None:
        """(file, first line) of the one-file deck this slide came from, when it says."""
        value = self.spot.get(SOURCE_DIRECTIVE)
        file, _, line = str(value or "").rpartition(":")
        return (file, int(line)) if file and line.isdigit() else None


@lru_cache(maxsize=1)
def _block_parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True})


def parse_attributes(text: str) -> dict[str, str]:
    """HTML-style `name="value"` pairs, as in reveal.js's `<!-- .slide: … -->`."""
    out: dict[str, str] = {}
    for match in _ATTR.finditer(text):
        value = match.group(2) or ""
        if value[:1] in ("'", '"'):
            value = value[1:-1]
        out[match.group(1)] = value
    return out


def loose_yaml(text: str) -> Any:
    """`text` loaded as YAML, reading `key: #abc` as a colour rather than a comment (as Marp)."""
    return yaml.safe_load(_HASH_VALUE.sub(_quote_hash, text))


def _quote_hash(match: re.Match[str]) -> str:
    return f"{match.group(1)}{json.dumps(match.group(2).strip())}"


def directive_mapping(body: str) -> dict[str, Any] | None:
    """The directives in a comment's `body`, or None when the comment is not only directives."""
    try:
        loaded = loose_yaml(body)
    except yaml.YAMLError:
        return None
    if not isinstance(loaded, dict) or not loaded:
        return None
    known = LOCAL_DIRECTIVES | GLOBAL_DIRECTIVES | {SOURCE_DIRECTIVE, SLIDEV_DIRECTIVE}
    for key in loaded:
        if not isinstance(key, str) or key.removeprefix("_") not in known:
            return None
    return {str(k): v for k, v in loaded.items()}


def _blank(lines: list[str], start: int, end: int) -> None:
    for i in range(start, min(end, len(lines))):
        lines[i] = ""


def _take_comment(found: SlideComments, body: str, line: int) -> None:
    attrs = _SLIDE_ATTRS.match(body)
    if attrs:
        found.attributes.update(parse_attributes(attrs.group("attrs")))
        return
    if _ELEMENT_ATTRS.match(body):
        found.problems.append(
            (line, "reveal.js `.element` attributes (fragments) are ignored; all content shows")
        )
        return
    if _FIT.match(body):
        return
    directives = directive_mapping(body)
    if directives is None:
        note = body.strip()
        if note:
            found.notes.append(note)
        return
    for key, value in directives.items():
        if key.startswith("_"):
            found.spot[key[1:]] = value
        elif key in LOCAL_DIRECTIVES:
            found.local[key] = value
        if key in GLOBAL_DIRECTIVES and key not in LOCAL_DIRECTIVES:
            found.global_[key] = value


def split_comments(text: str) -> SlideComments:
    """The comments of one slide's Markdown read, and the text left without them.

    Only block-level comments count (a comment alone on its lines); an inline `<!--fit-->`
    stays in the text for the renderer to drop.
    """
    lines = text.split("\n")
    found = SlideComments(text=text)
    notes_from: int | None = None
    tokens = _block_parser().parse(text)
    for i, token in enumerate(tokens):
        if token.map is None or token.level != 0:
            continue
        start, end = token.map
        if token.type == "html_block":
            match = _COMMENT.match(token.content)
            if match and token.content.count("<!--") == 1:
                _take_comment(found, match.group("body"), start + 1)
                _blank(lines, start, end)
        elif (
            token.type == "paragraph_open"
            and notes_from is None
            and i + 1 < len(tokens)
            and _NOTE_START.match(tokens[i + 1].content)
        ):
            notes_from = start
    if notes_from is not None:
        note = _NOTE_START.sub("", "\n".join(lines[notes_from:]), count=1).strip()
        if note:
            found.notes.append(note)
        _blank(lines, notes_from, len(lines))
    found.text = "\n".join(lines)
    return found


_SIZE = re.compile(r"^(?P<key>w|width|h|height):(?P<value>\d+(?:\.\d+)?(?:px|%|em|rem)?)$")
_SPLIT = re.compile(r"^(?P<side>left|right)(?::(?P<size>\d+(?:\.\d+)?%))?$")
_PERCENT = re.compile(r"^\d+(?:\.\d+)?%$")
_FILTER = re.compile(
    r"^(?P<name>blur|brightness|contrast|drop-shadow|grayscale|hue-rotate|invert|opacity"
    r"|saturate|sepia)(?::(?P<arg>[\w.#%,-]+))?$"
)
_FILTER_DEFAULTS = {
    "blur": "10px",
    "brightness": "1.5",
    "contrast": "2",
    "drop-shadow": "0 5px 10px rgba(0,0,0,.4)",
    "grayscale": "1",
    "hue-rotate": "180deg",
    "invert": "1",
    "opacity": ".5",
    "saturate": "2",
    "sepia": "1",
}


@dataclass
class ImageOptions:
    """Marp's image keywords read from an image's alt text (`bg left:40% contain`, `w:300`)."""

    alt: str
    background: bool = False
    size: str | None = None
    split: str | None = None
    split_size: str = "50%"
    vertical: bool = False
    width: str | None = None
    height: str | None = None
    filters: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def _length(value: str) -> str:
    return value if not value[-1].isdigit() else value + "px"


def image_options(alt: str) -> ImageOptions:
    """The keywords of `alt` understood; words that are not keywords stay as the alt text."""
    words = alt.split()
    options = ImageOptions(alt="")
    options.background = bool(words) and words[0] == "bg"
    kept: list[str] = []
    for word in words[1:] if options.background else words:
        size = _SIZE.match(word)
        split = _SPLIT.match(word) if options.background else None
        filt = _FILTER.match(word)
        if size:
            value = _length(size.group("value"))
            if size.group("key").startswith("w"):
                options.width = value
            else:
                options.height = value
        elif options.background and word in ("contain", "cover", "auto", "fit"):
            options.size = "contain" if word == "fit" else word
        elif options.background and _PERCENT.match(word):
            options.size = word
        elif split:
            options.split = split.group("side")
            options.split_size = split.group("size") or "50%"
        elif options.background and word == "vertical":
            options.vertical = True
        elif filt:
            arg = filt.group("arg") or _FILTER_DEFAULTS[filt.group("name")]
            options.filters.append(f"{filt.group('name')}({arg.replace(',', ' ')})")
        else:
            kept.append(word)
    options.alt = " ".join(kept)
    return options


_REVEAL_ATTRS = {
    "data-background-color": "backgroundColor",
    "data-background-image": "backgroundImage",
    "data-background-size": "backgroundSize",
    "data-background-position": "backgroundPosition",
    "data-background-repeat": "backgroundRepeat",
}
_COLOR_LIKE = re.compile(r"^(#[0-9A-Fa-f]{3,8}|[a-zA-Z]+|(rgb|hsl)a?\([^)]*\))$")


def attribute_directives(attributes: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """reveal.js slide attributes as directives, and the names of those that have none."""
    out: dict[str, Any] = {}
    ignored: list[str] = []
    for name, value in attributes.items():
        if name == "class":
            out["class"] = value
        elif name == "data-background":
            key = "backgroundColor" if _COLOR_LIKE.match(value.strip()) else "backgroundImage"
            out[key] = value
        elif name in _REVEAL_ATTRS:
            out[_REVEAL_ATTRS[name]] = value
        else:
            ignored.append(name)
    image = out.get("backgroundImage")
    if isinstance(image, str) and not image.startswith(("url(", "linear-gradient(")):
        out["backgroundImage"] = f'url("{image}")'
    return out, ignored
