"""Slidev's per-slide settings and Vue blocks: what opens a slide as front matter, what is left out.

A slide's front matter follows Slidev's parser: the `---` separator followed at once by a
non-blank line opens a YAML mapping that the next `---` line closes, whatever its keys (a blank
line after the separator keeps it a plain separator), or a ```` ```yaml ```` block opening the
slide. A slide's `<script setup>` is Vue's, never run by Deckyard, so it is left out of the page.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from deckyard.decks.source.markdown_directives import loose_yaml
from deckyard.decks.source.markdown_scan import script_blocks

SLIDEV_KEYS = frozenset(
    {
        "layout",
        "class",
        "background",
        "image",
        "transition",
        "clicks",
        "hideInToc",
        "level",
        "title",
        "hide",
        "disabled",
        "zoom",
        "preload",
        "src",
        "routeAlias",
        "backgroundColor",
        "color",
        "paginate",
        "header",
        "footer",
    }
)
"""Keys of Slidev's slide front matter; a Marp deck's `---` block is settings only with one."""
_CLOSING = re.compile(r"^---\s*$")
_KEY_LINE = re.compile(r"^[\w-]+\s*:")
_YAML_FENCE = re.compile(r"^```ya?ml\s*$")


def slide_front_matter(
    lines: list[str], start: int, code: set[int], *, strict: bool
) -> tuple[int, dict[str, Any], str | None]:
    """Per-slide front matter after the separator at `start`: (lines used, mapping, problem).

    `code` holds the lines inside code, where nothing opens or closes. `strict` (a Marp deck,
    where `---` is only a separator) also asks for a key Slidev knows. A block that reads like
    front matter but is not valid YAML stays text, and `problem` says why.
    """
    opening = start + 1
    if opening >= len(lines) or not lines[opening].strip() or opening in code:
        return 0, {}, None
    for end in range(opening, len(lines)):
        if end in code:
            return 0, {}, None
        if _CLOSING.match(lines[end]):
            break
    else:
        return 0, {}, None
    try:
        loaded = loose_yaml("\n".join(lines[opening:end]))
    except yaml.YAMLError as exc:
        if strict or not _KEY_LINE.match(lines[opening]):
            return 0, {}, None
        problem = str(getattr(exc, "problem", None) or "invalid YAML")
        return 0, {}, f"this slide front matter is not valid YAML ({problem}); it shows as text"
    if not isinstance(loaded, dict) or not loaded:
        return 0, {}, None
    mapping = {str(k): v for k, v in loaded.items()}
    if strict and not SLIDEV_KEYS & mapping.keys():
        return 0, {}, None
    return end - start, mapping, None


def block_front_matter(lines: list[str]) -> tuple[dict[str, Any], int] | None:
    """(settings, 0-based line) of a ```` ```yaml ```` block opening the slide's `lines`.

    The block's lines are blanked in `lines`, so the rest keeps its line numbers.
    """
    starts = [i for i, s in enumerate(lines) if s.strip()]
    if not starts or not _YAML_FENCE.match(lines[starts[0]].strip()):
        return None
    first = starts[0]
    for end in range(first + 1, len(lines)):
        if lines[end].strip() == "```":
            try:
                loaded = loose_yaml("\n".join(lines[first + 1 : end]))
            except yaml.YAMLError:
                return None
            if not isinstance(loaded, dict) or not loaded:
                return None
            lines[first : end + 1] = [""] * (end + 1 - first)
            return {str(k): v for k, v in loaded.items()}, first + 1
    return None


def without_scripts(text: str) -> tuple[str, list[tuple[int, str]]]:
    """`text` with its `<script>` blocks blanked, and `(line, message)` for each."""
    lines = text.split("\n")
    problems: list[tuple[int, str]] = []
    for start, end in script_blocks(text):
        problems.append((start + 1, "Vue script is not run; the <script> block is left out"))
        lines[start:end] = [""] * (end - start)
    return "\n".join(lines), problems
