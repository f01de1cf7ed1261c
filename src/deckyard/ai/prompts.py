"""What the model is told: the deck format's rules, the page, the theme, and the problems found.

Prompts are plain chat messages. The system message carries the rules the compiler and the
render check enforce, so a first answer has a fair chance to pass; a repair round adds the
problems of the last answer (page, line, code, message) and asks for the whole page again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from deckyard.decks.source.deck_source import PageKind
from deckyard.decks.validation.result import Diagnostic

Message = dict[str, str]
THEME_LIMIT = 6000
"""Characters of the theme CSS shown to the model; a longer theme is cut (and says so)."""

RULES = """You write one slide of a Deckyard presentation deck.
Rules the deck checker enforces (an answer that breaks them is sent back to you):
- Answer with the complete source of ONE page and nothing else, in a single fenced code block.
- A {kind_name} page. {kind_rule}
- The slide is exactly {width}x{height} CSS pixels; nothing may overflow it.
- Images, fonts and CSS url()s may only point to files in the deck's assets/ folder by relative
  path (e.g. assets/logo.png). No external URLs, no ../ paths. Available assets: {assets}.
- A <style> element in the page applies to this slide only. The theme CSS below applies to
  every slide; use its classes and variables rather than restyling everything.
- Scripts must not throw; no network requests.
"""

KIND_RULES = {
    PageKind.HTML: "Write an HTML fragment (no <html>, <head> or <body> needed).",
    PageKind.MARKDOWN: "Write CommonMark Markdown (tables and strikethrough allowed; raw HTML "
    "is allowed where Markdown cannot say it).",
}


@dataclass(frozen=True)
class PageContext:
    """What the model needs to know about the deck around the page."""

    title: str
    width: int
    height: int
    theme_css: str
    assets: Sequence[str]


def system_message(ctx: PageContext, kind: PageKind) -> Message:
    """The rules, with the deck's size, assets and theme."""
    theme = ctx.theme_css.strip()
    if len(theme) > THEME_LIMIT:
        theme = theme[:THEME_LIMIT] + "\n/* … theme cut here … */"
    text = RULES.format(
        kind_name="Markdown" if kind is PageKind.MARKDOWN else "HTML",
        kind_rule=KIND_RULES[kind],
        width=ctx.width,
        height=ctx.height,
        assets=", ".join(ctx.assets[:200]) or "none",
    )
    text += f'\nDeck title: "{ctx.title}".\nTheme CSS:\n```css\n{theme or "/* none */"}\n```\n'
    return {"role": "system", "content": text}


def edit_messages(
    ctx: PageContext, name: str, kind: PageKind, source: str, instruction: str
) -> list[Message]:
    """The first round of an edit: rules, the page's current source, the instruction."""
    fence = "markdown" if kind is PageKind.MARKDOWN else "html"
    user = (
        f"Current source of page {name!r}:\n```{fence}\n{source.rstrip()}\n```\n\n"
        f"Change it as follows, keeping everything else:\n{instruction.strip()}"
    )
    return [system_message(ctx, kind), {"role": "user", "content": user}]


def create_messages(ctx: PageContext, name: str, kind: PageKind, prompt: str) -> list[Message]:
    """The first round of a new page: rules and what the page should say."""
    user = f"Write a new page {name!r} for this deck.\n{prompt.strip()}"
    return [system_message(ctx, kind), {"role": "user", "content": user}]


def problem_lines(diagnostics: Sequence[Diagnostic], limit: int = 30) -> list[str]:
    """One line per problem: page, line, code and message (errors first)."""
    ordered = sorted(diagnostics, key=lambda d: (d.severity != "error", d.line or 0))
    out = []
    for d in ordered[:limit]:
        where = f"page {d.page or '?'}" + (f", line {d.line}" if d.line else "")
        ref = f" ({d.reference})" if d.reference else ""
        out.append(f"- {where}: {d.code}: {d.message}{ref}")
    if len(ordered) > limit:
        out.append(f"- … and {len(ordered) - limit} more")
    return out


def repair_message(summary: str, diagnostics: Sequence[Diagnostic]) -> Message:
    """The message of a repair round: what failed in the last answer."""
    lines = problem_lines(diagnostics) or [f"- {summary}"]
    text = (
        "The deck checker refused that page:\n"
        + "\n".join(lines)
        + "\nFix these problems and answer with the complete corrected page only."
    )
    return {"role": "user", "content": text}


def no_source_message(kind: PageKind) -> Message:
    """The message of a repair round after an answer that carried no page at all."""
    return {
        "role": "user",
        "content": "That answer contained no page source. Answer with the complete "
        f"{'Markdown' if kind is PageKind.MARKDOWN else 'HTML'} page in one fenced code block.",
    }
