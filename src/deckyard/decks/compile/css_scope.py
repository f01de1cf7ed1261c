"""Scopes a page's CSS to its slide and inlines every `url()` with tinycss2.

Selectors are prefixed with the page's scoping selector, so `h1 {color: red}` on one page cannot
reach another page's slides in the print document; `html`, `:root`, `body` and `.slide` at the
start of a selector mean the slide itself. `@media`, `@supports`, `@container` and `@layer`
blocks are scoped inside; `@font-face`, `@keyframes` and other definitions stay global. `@import`
and `@page` are refused: imports would load outside the compiler's view, and the page size
belongs to the deck. Problems are collected, not raised, so one compile reports all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import tinycss2

from deckyard.decks.compile.assets import AssetResolver, ReferenceProblem
from deckyard.decks.css_urls import rewrite_urls
from deckyard.decks.errors import CompileErrorCode

_NESTED_RULE_BLOCKS = frozenset({"media", "supports", "container", "layer", "document", "scope"})
_REFUSED = {
    "import": "@import is not supported; put the rules in the page or the theme",
    "page": "@page is not supported; the slide size comes from deck.toml",
}
_COMBINATORS = frozenset({">", "+", "~"})


@dataclass(frozen=True)
class CssProblem:
    """A problem in a stylesheet, with its line counted in the enclosing file."""

    code: CompileErrorCode
    message: str
    line: int
    reference: str | None = None


@dataclass
class CssContext:
    """What rewriting one stylesheet needs: the resolver, a base folder, a line offset."""

    resolver: AssetResolver
    base_dir: str = ""
    first_line: int = 1
    problems: list[CssProblem] = field(default_factory=list)

    def line(self, node: Any) -> int:
        """The line of `node` in the enclosing file."""
        return self.first_line + int(getattr(node, "source_line", 1)) - 1

    def resolve(self, reference: str, node: Any) -> str | None:
        """`reference` inlined, or None after recording why it cannot be."""
        try:
            return self.resolver.resolve(reference, self.base_dir)
        except ReferenceProblem as problem:
            self.problems.append(
                CssProblem(problem.code, problem.message, self.line(node), reference)
            )
            return None


def rewrite_values(css: str, ctx: CssContext) -> str:
    """`css` (declarations, as in a `style` attribute) with its `url()`s inlined."""
    nodes = tinycss2.parse_component_value_list(css, skip_comments=True)
    rewrite_urls(nodes, ctx.resolve)
    return str(tinycss2.serialize(nodes))


def _split_selectors(prelude: list[Any]) -> list[list[Any]]:
    selectors: list[list[Any]] = [[]]
    for node in prelude:
        if getattr(node, "type", None) == "literal" and node.value == ",":
            selectors.append([])
        else:
            selectors[-1].append(node)
    return [_strip(sel) for sel in selectors]


def _strip(nodes: list[Any]) -> list[Any]:
    start, end = 0, len(nodes)
    while start < end and getattr(nodes[start], "type", None) in ("whitespace", "comment"):
        start += 1
    while end > start and getattr(nodes[end - 1], "type", None) in ("whitespace", "comment"):
        end -= 1
    return nodes[start:end]


def _compound_end(nodes: list[Any]) -> int:
    for i, node in enumerate(nodes):
        kind = getattr(node, "type", None)
        if kind == "whitespace" or (kind == "literal" and node.value in _COMBINATORS):
            return i
    return len(nodes)


def _is(nodes: list[Any], *parts: tuple[str, str]) -> bool:
    return len(nodes) >= len(parts) and all(
        getattr(node, "type", None) == kind and str(getattr(node, "value", "")).lower() == value
        for node, (kind, value) in zip(nodes, parts, strict=False)
    )


def scope_selector(selector: list[Any], scope: str) -> str:
    """`selector` made to match only inside the slide selected by `scope`."""
    nodes = _strip(selector)
    end = _compound_end(nodes)
    head = nodes[:end]
    if (_is(head, ("ident", "html")) and end == 1) or (
        _is(head, ("literal", ":"), ("ident", "root")) and end == 2
    ):
        rest = nodes[end:]
        while rest and (
            getattr(rest[0], "type", None) == "whitespace"
            or (getattr(rest[0], "type", None) == "literal" and rest[0].value in _COMBINATORS)
        ):
            rest = rest[1:]
        if not rest:
            return scope
        nodes = rest
        end = _compound_end(nodes)
        head = nodes[:end]
    if _is(head, ("ident", "body")):
        return scope + str(tinycss2.serialize(nodes[1:]))
    if _is(head, ("literal", "."), ("ident", "slide")) and (
        len(head) == 2 or getattr(head[2], "type", None) != "ident"
    ):
        return scope + str(tinycss2.serialize(nodes[2:]))
    return f"{scope} {tinycss2.serialize(nodes)}"


def _rules(nodes: list[Any], ctx: CssContext, scope: str | None) -> str:
    out: list[str] = []
    for node in nodes:
        kind = getattr(node, "type", None)
        if kind == "error":
            ctx.problems.append(
                CssProblem(
                    CompileErrorCode.CSS_SYNTAX, f"invalid CSS: {node.message}", ctx.line(node)
                )
            )
        elif kind == "qualified-rule":
            rewrite_urls(node.content, ctx.resolve)
            body = str(tinycss2.serialize(node.content))
            if scope is None:
                selectors = str(tinycss2.serialize(node.prelude)).strip()
            else:
                selectors = ", ".join(
                    scope_selector(sel, scope) for sel in _split_selectors(node.prelude) if sel
                )
            out.append(f"{selectors} {{{body}}}")
        elif kind == "at-rule":
            out.append(_at_rule(node, ctx, scope))
        elif kind in ("whitespace", "comment"):
            continue
    return "\n".join(part for part in out if part)


def _at_rule(node: Any, ctx: CssContext, scope: str | None) -> str:
    keyword = str(node.lower_at_keyword)
    if keyword == "charset":
        return ""
    if keyword in _REFUSED:
        ctx.problems.append(
            CssProblem(CompileErrorCode.CSS_UNSUPPORTED, _REFUSED[keyword], ctx.line(node))
        )
        return ""
    rewrite_urls(node.prelude, ctx.resolve)
    prelude = str(tinycss2.serialize(node.prelude)).strip()
    head = f"@{node.at_keyword} {prelude}".rstrip()
    if node.content is None:
        return head + ";"
    if keyword in _NESTED_RULE_BLOCKS:
        inner = tinycss2.parse_rule_list(node.content, skip_comments=True)
        return f"{head} {{\n{_rules(inner, ctx, scope)}\n}}"
    rewrite_urls(node.content, ctx.resolve)
    return f"{head} {{{tinycss2.serialize(node.content)}}}"


def rewrite_stylesheet(css: str, ctx: CssContext, scope: str | None = None) -> str:
    """`css` with `url()`s inlined and, when `scope` is given, every rule scoped to it."""
    rules = tinycss2.parse_stylesheet(css, skip_comments=True)
    return _rules(rules, ctx, scope)
