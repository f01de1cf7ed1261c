"""Finds code fences and comments a Markdown deck never closes, and the slides they swallow.

An unclosed fence runs to the end of the file: the slide separators after it are code, so the
slides after it disappear into one slide's code block, silently. An unclosed `<!--` hides the
rest of its slide. Both are warnings naming the line where the block opens.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from deckyard.decks.source.deck_source import SourceWarning

_SEPARATOR = re.compile(r"^---\s*$")
_COMMENT_OPEN = re.compile(r"<!--")


def _unclosed_fences(text: str, lines: list[str], filename: str) -> list[SourceWarning]:
    warnings: list[SourceWarning] = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "fence" or not token.map:
            continue
        start, end = token.map
        last = lines[end - 1].strip() if end - 1 > start else ""
        if last.startswith(token.markup) and not last.strip(token.markup[0]):
            continue
        swallowed = sum(1 for line in lines[start + 1 : end] if _SEPARATOR.match(line))
        what = f"; the {swallowed} slide separator(s) after it are inside it" if swallowed else ""
        message = f"this code fence ({token.markup}) is never closed{what}"
        warnings.append(SourceWarning(file=filename, line=start + 1, message=message))
    return warnings


def unclosed_blocks(text: str, filename: str) -> list[SourceWarning]:
    """A warning, with its line, for each code fence or comment of `text` never closed."""
    lines = text.split("\n")
    warnings = _unclosed_fences(text, lines, filename)
    for number, line in enumerate(lines, 1):
        for opened in _COMMENT_OPEN.finditer(line):
            if "-->" not in "\n".join([line[opened.end() :], *lines[number:]]):
                message = "this comment (<!--) is never closed; the rest of its slide is hidden"
                warnings.append(SourceWarning(file=filename, line=number, message=message))
                return warnings
    return warnings
