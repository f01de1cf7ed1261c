"""Splits a reveal.js deck's `data-markdown` sections into slides, as its Markdown plugin does.

reveal.js's Markdown plugin replaces each `<section data-markdown>` with the slides its text
holds when the deck starts, cut at the section's `data-separator` (horizontal) and
`data-separator-vertical` patterns, reveal.js's defaults where it names none. Deckyard renders
one slide a page and counts the slides before any script runs, so it makes that cut first, with
the same patterns and the same rule for stacks; each piece stays a `data-markdown` section with
its text in a `text/template` script, which the plugin itself then turns into HTML, with the
notes after the section's `data-separator-notes` (`Note:` by default). Nothing of the Markdown
is rendered here.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from bs4 import BeautifulSoup
from bs4.element import Tag

from deckyard.decks.source.deck_source import SourceWarning

DEFAULT_SEPARATOR = r"\r?\n---\r?\n"
DEFAULT_NOTES = r"^s*notes?:"
"""reveal.js's own default, written so in its source: `^s*` (not `^\\s*`) matches `Note:` at
the start of a line, as in reveal.js."""
NEVER = "(?!)"
"""The separator each piece gets, so the plugin does not cut it again."""
SCRIPT_END = "__SCRIPT_END__"
_NOT_FORWARDED = re.compile(r"data-(markdown|separator|vertical|notes)", re.IGNORECASE)


def _text(tag: Tag) -> str:
    """The text of `tag` as the browser's `textContent` (bs4 leaves a script's text out)."""
    return str(tag.string or "") if tag.name == "script" else tag.get_text()


def _markdown_of(section: Tag, files: Mapping[str, bytes], base: str) -> str | None:
    """The section's Markdown: its external file (`data-markdown="x.md"`) or its template."""
    external = str(section.get("data-markdown") or "")
    if external:
        data = files.get(posixpath.normpath(posixpath.join(base, external.split("?")[0])))
        return None if data is None else data.decode("utf-8", errors="replace")
    template = section.select_one("[data-template]") or section.find("script")
    text = _text(template if isinstance(template, Tag) else section)
    tabs = len(re.match(r"^\n?(\t*)", text)[1])  # type: ignore[index]
    spaces = len(re.match(r"^\n?(\s*)", text)[1])  # type: ignore[index]
    if tabs > 0:
        return re.sub(r"\n?\t{" + str(tabs) + r"}(.*)", r"\n\1", text)
    if spaces > 1:
        return re.sub(r"\n? {" + str(spaces) + r"}(.*)", r"\n\1", text)
    return text


def slidify(markdown: str, separator: str, vertical: str | None) -> list[str | list[str]]:
    """The pieces of `markdown`: a string per horizontal slide, a list per vertical stack.

    The rule is the plugin's: a vertical separator after a horizontal one opens a stack, the
    piece before a separator joins the open stack unless both separators are horizontal.
    """
    pattern = re.compile(separator + (f"|{vertical}" if vertical else ""), re.MULTILINE)
    horizontal = re.compile(separator)
    stack: list[str | list[str]] = []
    last, was_horizontal = 0, True
    for found in pattern.finditer(markdown):
        is_horizontal = horizontal.search(found.group(0)) is not None
        if not is_horizontal and was_horizontal:
            stack.append([])
        piece = markdown[last : found.start()]
        if is_horizontal and was_horizontal:
            stack.append(piece)
        else:
            open_stack = stack[-1]
            assert isinstance(open_stack, list)
            open_stack.append(piece)
        last, was_horizontal = found.end(), is_horizontal
    rest = markdown[last:]
    if was_horizontal:
        stack.append(rest)
    else:
        open_stack = stack[-1]
        assert isinstance(open_stack, list)
        open_stack.append(rest)
    return stack


def _piece(soup: BeautifulSoup, text: str, notes: str | None, attrs: dict[str, str]) -> Tag:
    section = soup.new_tag("section", attrs={**attrs, "data-markdown": "", "data-separator": NEVER})
    if notes:
        section["data-separator-notes"] = notes
    script = BeautifulSoup(
        '<script type="text/template">' + text.replace("</script>", SCRIPT_END) + "</script>",
        "html5lib",
    ).find("script")
    assert isinstance(script, Tag)
    section.append(script.extract())
    return section


def expand_markdown_sections(
    soup: BeautifulSoup, files: Mapping[str, bytes], entry: str
) -> list[SourceWarning]:
    """Replace each top-level `data-markdown` section of `soup` by its slides; the warnings.

    A section whose file is missing or whose pattern is not one Python can read stays one slide,
    with a warning naming it.
    """
    container = soup.select_one(".reveal > .slides")
    if container is None:
        return []
    base = posixpath.dirname(entry)
    warnings: list[SourceWarning] = []
    for section in container.find_all("section", recursive=False):
        if not isinstance(section, Tag) or not section.has_attr("data-markdown"):
            continue
        line = section.sourceline
        markdown = _markdown_of(section, files, base)
        if markdown is None:
            missing = section.get("data-markdown")
            warnings.append(
                SourceWarning(file=entry, line=line, message=f"data-markdown: no file {missing}")
            )
            continue
        separator = str(section.get("data-separator") or DEFAULT_SEPARATOR)
        vertical = section.get("data-separator-vertical")
        notes = section.get("data-separator-notes")
        try:
            pieces = slidify(markdown, separator, str(vertical) if vertical else None)
        except re.error as exc:
            warnings.append(
                SourceWarning(
                    file=entry,
                    line=line,
                    message=f"data-markdown: a separator Deckyard cannot read ({exc}); the "
                    "section is counted as one slide",
                )
            )
            continue
        forwarded = {
            str(k): " ".join(v) if isinstance(v, list) else str(v)
            for k, v in section.attrs.items()
            if not _NOT_FORWARDED.search(str(k))
        }
        notes_at = str(notes) if notes else None
        replacement: list[Tag] = []
        for piece in pieces:
            if isinstance(piece, list):
                stack = soup.new_tag("section", attrs=forwarded)
                for text in piece:
                    stack.append(_piece(soup, text, notes_at, {}))
                replacement.append(stack)
            else:
                replacement.append(_piece(soup, piece, notes_at, forwarded))
        section.replace_with(*replacement)
    return warnings


def markdown_notes(section: Tag) -> str | None:
    """The notes of a split `data-markdown` slide: its text after the notes separator."""
    script = section.find("script", attrs={"type": "text/template"}, recursive=False)
    if not section.has_attr("data-markdown") or not isinstance(script, Tag):
        return None
    pattern = str(section.get("data-separator-notes") or DEFAULT_NOTES)
    try:
        parts = re.split(pattern, _text(script), flags=re.MULTILINE | re.IGNORECASE)
    except re.error:
        return None
    return parts[1].strip() if len(parts) == 2 else None
