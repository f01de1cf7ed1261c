"""The built-in themes (package data in `theme_css/`) and a theme's `@import`s, resolved.

A theme may start with `@import "default"` (a built-in, as Marp themes do) or
`@import "other.css"` / `@import url(…)` (another file of the deck, relative to the theme). Each
imported sheet becomes its own `ThemeSheet` with its own base folder, so its `url()`s stay
relative to where it was written; the compiler scopes and inlines each one. Names of Marp,
Slidev and reveal.js themes map to the closest built-in, with a note saying so.

A rule tinycss2 cannot parse (a stray `}`, say) is a `ParseError` node, which has no text form:
it is reported as a problem with its line and column and left out of the sheet, as a browser
would drop it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import tinycss2
from pygments.formatters import HtmlFormatter

from deckyard.decks.compile.slide_markdown import CODE_CLASS
from deckyard.decks.errors import CompileErrorCode
from deckyard.decks.source.remote import REMOTE_DIR, remote_asset_stem
from deckyard.decks.source.theme_names import BUILTIN_THEMES, THEME_ALIASES, builtin_name

_PACKAGE = "deckyard.decks.compile"
_DATA_DIR = "theme_css"


@dataclass(frozen=True)
class ThemeSheet:
    """One stylesheet of a theme: its text, the folder its `url()`s are relative to, its name."""

    css: str
    base_dir: str
    origin: str


@dataclass(frozen=True)
class ThemeProblem:
    """A problem in one sheet of a theme: which file, which line, what and its code."""

    origin: str
    line: int
    message: str
    code: CompileErrorCode = CompileErrorCode.CSS_UNSUPPORTED


@dataclass
class ThemeImports:
    """A theme's sheets in cascade order (imports first) and the problems met on the way."""

    sheets: list[ThemeSheet] = field(default_factory=list)
    problems: list[ThemeProblem] = field(default_factory=list)


def _data(name: str) -> str:
    return resources.files(_PACKAGE).joinpath(_DATA_DIR, name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def core_css() -> str:
    """The layout every Markdown slide needs (backgrounds, header, footer, fluid type)."""
    return _data("core.css")


@lru_cache(maxsize=8)
def _builtin_text(name: str) -> str:
    style = BUILTIN_THEMES[name]
    formatter: HtmlFormatter[str] = HtmlFormatter(style=style)
    code = formatter.get_style_defs(f".slide .{CODE_CLASS}")  # type: ignore[no-untyped-call]
    return f"{_data(name + '.css')}\n/* code: Pygments {style} */\n{code}\n"


def _import_target(rule: Any) -> str | None:
    for token in rule.prelude:
        if token.type in ("string", "url"):
            return str(token.value)
        if token.type == "function" and token.lower_name == "url":
            for arg in token.arguments:
                if arg.type == "string":
                    return str(arg.value)
        if token.type not in ("whitespace", "comment"):
            return None
    return None


def _fetched(files: Mapping[str, bytes], url: str) -> str | None:
    """The deck path of the stylesheet fetched for the remote `url`, if it was."""
    stem = remote_asset_stem(url)
    return next((p for p in files if p.startswith(REMOTE_DIR) and p == stem + ".css"), None)


def _expand(
    css: str,
    base_dir: str,
    origin: str,
    files: Mapping[str, bytes],
    out: ThemeImports,
    seen: frozenset[str],
) -> None:
    rules = tinycss2.parse_stylesheet(css, skip_comments=False, skip_whitespace=False)
    kept: list[Any] = []
    for rule in rules:
        line = int(getattr(rule, "source_line", 1))
        if rule.type == "error":
            message = (
                f"invalid CSS at column {rule.source_column}: {rule.message} "
                "(a stray '}' or a selector without its { } block?)"
            )
            out.problems.append(ThemeProblem(origin, line, message, CompileErrorCode.CSS_SYNTAX))
            continue
        if rule.type != "at-rule" or rule.lower_at_keyword != "import":
            kept.append(rule)
            continue
        target = _import_target(rule)
        if target is None:
            out.problems.append(ThemeProblem(origin, line, "this @import names no stylesheet"))
            continue
        builtin = target.strip().lower()
        if builtin in BUILTIN_THEMES or builtin in THEME_ALIASES:
            name, _ = builtin_name(builtin)
            if f"builtin:{name}" not in seen:
                text = _builtin_text(name)
                _expand(text, "", f"builtin:{name}", files, out, seen | {f"builtin:{name}"})
            continue
        path = posixpath.normpath(posixpath.join(base_dir, target.split("?", 1)[0]))
        if "://" in target or target.startswith("//"):
            fetched = _fetched(files, target)
            if fetched is None:
                message = (
                    f"@import {target!r} is remote and was not fetched (`deckyard render "
                    "--offline`, or the workspace's fetch_remote setting or the server's "
                    "deck_fetch_remote is off); render without --offline, or download it into "
                    "assets/"
                )
                out.problems.append(ThemeProblem(origin, line, message))
            elif fetched not in seen:
                text = files[fetched].decode("utf-8-sig", errors="replace")
                _expand(text, posixpath.dirname(fetched), fetched, files, out, seen | {fetched})
        elif path in seen:
            out.problems.append(ThemeProblem(origin, line, f"@import {target!r} imports itself"))
        elif path not in files:
            out.problems.append(
                ThemeProblem(origin, line, f"@import {target!r}: no such file ({path})")
            )
        else:
            text = files[path].decode("utf-8-sig", errors="replace")
            _expand(text, posixpath.dirname(path), path, files, out, seen | {path})
    out.sheets.append(ThemeSheet(tinycss2.serialize(kept), base_dir, origin))


def expand_theme(css: str, path: str | None, files: Mapping[str, bytes]) -> ThemeImports:
    """`css` (the theme at `path`, or inline) with its `@import`s resolved against `files`."""
    out = ThemeImports()
    origin = path or "theme"
    _expand(css, posixpath.dirname(path or ""), origin, files, out, frozenset({origin}))
    return out


def builtin_theme(name: str) -> ThemeImports:
    """The built-in theme `name` (after `builtin_name`) as sheets."""
    return expand_theme(f'@import "{name}";', None, {})


def only_markdown(css: str) -> str:
    """`css` with `.slide` narrowed to Markdown slides, for the theme a deck gets unasked."""
    return css.replace(".slide", ".slide.dy-md")
