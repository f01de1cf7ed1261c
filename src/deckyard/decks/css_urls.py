"""Every `url()` of a piece of CSS, rewritten by a function: one walk for the compiler (which
inlines them) and for remote stylesheets (whose relative URLs become absolute when fetched)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tinycss2
from tinycss2 import ast

URL_STRING_FUNCTIONS = frozenset({"url", "image-set", "-webkit-image-set"})

Rewrite = Callable[[str, Any], str | None]
"""A URL (and its token, for line numbers) to its replacement, or None to keep it."""


def quoted(value: str) -> str:
    """`value` as a CSS string."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\a ")
    return f'"{escaped}"'


def rewrite_urls(nodes: list[Any], rewrite: Rewrite) -> None:
    """Replace, in place, every `url()` (and `image-set()` string) in `nodes` by `rewrite`'s."""
    for i, node in enumerate(nodes):
        kind = getattr(node, "type", None)
        if kind == "url":
            new = rewrite(node.value, node)
            if new is not None:
                nodes[i] = ast.URLToken(
                    node.source_line, node.source_column, new, "url(" + quoted(new) + ")"
                )
        elif kind == "function":
            if node.lower_name in URL_STRING_FUNCTIONS:
                for j, arg in enumerate(node.arguments):
                    if getattr(arg, "type", None) == "string":
                        new = rewrite(arg.value, arg)
                        if new is not None:
                            node.arguments[j] = ast.StringToken(
                                arg.source_line, arg.source_column, new, quoted(new)
                            )
            rewrite_urls(node.arguments, rewrite)
        elif kind in ("() block", "[] block", "{} block"):
            rewrite_urls(node.content, rewrite)


def rewrite_stylesheet_urls(css: str, rewrite: Rewrite) -> str:
    """A whole stylesheet with its `url()`s rewritten, everything else as it was."""
    nodes = tinycss2.parse_component_value_list(css)
    rewrite_urls(nodes, rewrite)
    return str(tinycss2.serialize(nodes))
