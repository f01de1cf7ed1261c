"""Renders a Slidev slide's code block as Slidev shows it: Shiki's markup, vitesse's colours.

Slidev highlights a fence with Shiki and wraps it in `CodeBlockWrapper.vue`:
`div.slidev-code-wrapper > pre.shiki.slidev-code > code > span.line`, each token a span with
`--shiki-light` / `--shiki-dark` colours that Slidev's `code.css` picks from by colour schema.
Deckyard makes the same markup with Pygments' lexers, its token types mapped to the colours of
Shiki's `vitesse-light` and `vitesse-dark` themes (Slidev's defaults), so Slidev's stylesheet
styles it. The info string's extras after the language are read as Slidev reads them:
`[title]`, line ranges `{2,4-5}` (the other lines dimmed) and click steps `{all|2|3}` (the last
step, as Slidev's export shows a slide once all its clicks are done), `{lines:true}` (line
numbers). Monaco editors, twoslash hovers and Magic Move's animation have no static form: the
block shows highlighted (Magic Move: its last step) and `fence_problems` names what is lost.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import (
    Comment,
    Generic,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    _TokenType,
)
from pygments.util import ClassNotFound

_BRACES = re.compile(r"\{([^{}]*)\}")
_TITLE = re.compile(r"\[([^\]]*)\]")
_RANGE = re.compile(r"^\s*(?:\*|all|none|\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*)\s*$")
_LINES_OPTION = re.compile(r"\blines\s*:\s*true\b")
_MONACO = re.compile(r"^monaco(?:-run|-diff|-write)?$")
_INNER_FENCE = re.compile(
    r"^(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)\n(?P<code>.*?)^(?P=fence)\s*$", re.M | re.S
)

FOREGROUND = ("#393a34", "#dbd7caee")
"""vitesse-light's and vitesse-dark's text colour."""
BACKGROUND = ("#ffffff", "#121212")
_COLOURS: dict[_TokenType, tuple[str, str]] = {
    Comment: ("#a0ada0", "#758575dd"),
    Keyword: ("#1e754f", "#4d9375"),
    Keyword.Declaration: ("#ab5959", "#cb7676"),
    Keyword.Type: ("#2e8f82", "#5da994"),
    Keyword.Constant: ("#1e754f", "#4d9375"),
    Name: ("#b07d48", "#bd976a"),
    Name.Function: ("#59873a", "#80a665"),
    Name.Class: ("#2e8f82", "#5da994"),
    Name.Builtin: ("#998418", "#b8a965"),
    Name.Builtin.Pseudo: ("#a65e2b", "#c99076"),
    Name.Constant: ("#a65e2b", "#c99076"),
    Name.Namespace: ("#b05a78", "#db889a"),
    Name.Tag: ("#1e754f", "#4d9375"),
    Name.Attribute: ("#b07d48", "#bd976a"),
    Name.Decorator: ("#bd8f8f", "#bd8f8f"),
    String: ("#b56959", "#c98a7d"),
    String.Regex: ("#ab5e3f", "#c4704f"),
    Number: ("#2f798a", "#4c9a91"),
    Operator: ("#ab5959", "#cb7676"),
    Operator.Word: ("#1e754f", "#4d9375"),
    Punctuation: ("#999999", "#666666"),
    Generic.Heading: ("#1c6b48", "#4d9375"),
    Generic.Subheading: ("#1c6b48", "#4d9375"),
    Generic.Deleted: ("#b31d28", "#fdaeb7"),
    Generic.Inserted: ("#22863a", "#85e89d"),
    Generic.Emph: FOREGROUND,
    Generic.Strong: FOREGROUND,
}
"""Pygments token types in vitesse's (light, dark) colours, after Shiki's scopes for them."""


@dataclass(frozen=True)
class FenceInfo:
    """What a Slidev fence's info string asks for."""

    lang: str
    title: str
    steps: list[str]
    """The line ranges of each click step (`{all|2|3}`: three); one for a static range."""
    line_numbers: bool
    monaco: str
    twoslash: bool
    magic_move: bool


def fence_info(info: str) -> FenceInfo:
    """`info` (` ```ts [a.ts] {2|3} twoslash`) read as Slidev reads a fence's info string."""
    words = info.strip().split(maxsplit=1)
    head = words[0] if words else ""
    lang = re.split(r"[{\[]", head, maxsplit=1)[0]
    rest = info.strip()[len(lang) :]
    title = _TITLE.search(rest)
    steps: list[str] = []
    line_numbers = False
    monaco = ""
    for inside in _BRACES.findall(rest):
        parts = [p.strip() for p in inside.split("|")]
        if _MONACO.match(inside.strip()):
            monaco = inside.strip()
        elif all(_RANGE.match(p) for p in parts):
            steps = parts
        elif _LINES_OPTION.search(inside):
            line_numbers = True
    others = _BRACES.sub(" ", _TITLE.sub(" ", rest)).split()
    return FenceInfo(
        lang=lang,
        title=title.group(1).strip() if title else "",
        steps=steps,
        line_numbers=line_numbers,
        monaco=monaco,
        twoslash="twoslash" in others,
        magic_move="magic-move" in others,
    )


def fence_problems(info: str) -> list[str]:
    """What of a Slidev fence with `info` is not shown as Slidev shows it, as warnings."""
    found = fence_info(info)
    problems: list[str] = []
    if found.magic_move:
        problems.append("Shiki Magic Move is not animated; the block shows its last step")
    if len(found.steps) > 1:
        steps = "|".join(found.steps)
        problems.append(
            f"code-line highlighting steps ({{{steps}}}) are not stepped; "
            "the block shows its last step"
        )
    if found.monaco:
        problems.append(
            f"the Monaco editor ({{{found.monaco}}}) is not run; the code shows as a static block"
        )
    if found.twoslash:
        problems.append("twoslash type hovers and errors are not shown; the code shows highlighted")
    return problems


def _lines(spec: str, count: int) -> set[int] | None:
    """The 1-based lines the range `spec` highlights; None for all of them."""
    spec = spec.strip()
    if spec in ("", "*", "all"):
        return None
    if spec == "none":
        return set()
    chosen: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        first = int(low)
        last = int(high) if high.strip() else first
        chosen.update(range(first, min(last, count) + 1))
    return chosen


def _colour(kind: _TokenType) -> tuple[str, str] | None:
    found: _TokenType | None = kind
    while found is not None:
        if found in _COLOURS:
            return _COLOURS[found]
        found = found.parent
    return None


def _lexer(lang: str) -> Lexer | None:
    try:
        return get_lexer_by_name(lang) if lang else None
    except ClassNotFound:
        return None


def _line_spans(code: str, lexer: Lexer | None) -> list[str]:
    """Each line of `code` as the inner HTML of Shiki's `span.line`."""
    tokens = lexer.get_tokens(code) if lexer else [(Name.Other, code)]
    lines = [""]
    for kind, value in tokens:
        colour = _colour(kind) if lexer else None
        for i, piece in enumerate(value.split("\n")):
            if i:
                lines.append("")
            if not piece:
                continue
            text = html.escape(piece, quote=False)
            if colour is None:
                lines[-1] += f"<span>{text}</span>"
            else:
                style = f"--shiki-light:{colour[0]};--shiki-dark:{colour[1]}"
                lines[-1] += f'<span style="{style}">{text}</span>'
    if len(lines) > 1 and lines[-1] == "" and code.endswith("\n"):
        lines.pop()
    return lines


def code_block(code: str, info: FenceInfo) -> str:
    """The block as Slidev's `CodeBlockWrapper` holds it, highlighted in vitesse's colours."""
    if info.magic_move:
        steps = list(_INNER_FENCE.finditer(code))
        if steps:
            last = steps[-1]
            inner = fence_info(last.group("info"))
            last_step = FenceInfo(
                lang=inner.lang,
                title=info.title or inner.title,
                steps=inner.steps,
                line_numbers=info.line_numbers or inner.line_numbers,
                monaco="",
                twoslash=inner.twoslash,
                magic_move=False,
            )
            return code_block(last.group("code"), last_step)
    lines = _line_spans(code, _lexer(info.lang))
    highlighted = _lines(info.steps[-1], len(lines)) if info.steps else None
    rows = []
    for number, spans in enumerate(lines, start=1):
        state = ""
        if highlighted is not None:
            lit = number in highlighted
            state = " slidev-code-highlighted" if lit else " slidev-code-dishonored"
        rows.append(f'<span class="line{state}">{spans}</span>')
    wrapper = "slidev-code-wrapper relative group"
    wrapper += " slidev-code-line-numbers" if info.line_numbers else ""
    title = ""
    if info.title:
        shown = html.escape(re.sub(r"~([^~]+)~", "", info.title).strip())
        title = f'<div class="slidev-code-block-title"><div class="leading-1em">{shown}</div></div>'
    themes = (
        f"--shiki-light:{FOREGROUND[0]};--shiki-dark:{FOREGROUND[1]};"
        f"--shiki-light-bg:{BACKGROUND[0]};--shiki-dark-bg:{BACKGROUND[1]}"
    )
    language = f' class="language-{html.escape(info.lang)}"' if info.lang else ""
    return (
        f'<div class="{wrapper}">{title}'
        f'<pre class="shiki shiki-themes vitesse-light vitesse-dark slidev-code" '
        f'style="{themes}"><code{language}>' + "\n".join(rows) + "</code></pre></div>\n"
    )
