"""Math as latex2mathml takes it, and as Slidev writes it: click steps, paragraph breaks.

Slidev's KaTeX plugin lets a `$$` block start on the line right under a paragraph's text and
reads `$$ {1|3|all}` as click steps over the block's lines; latex2mathml knows no `aligned`
environment. The slide compiler and the source scan read math the same way through here.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from mdit_py_plugins.dollarmath.index import math_block_dollar

_RANGE = re.compile(r"^\s*(?:\*|all|none|\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*)\s*$")
_MATH_STEPS = re.compile(r"^[ \t]*\{(?P<steps>[^{}\n]*)\}[ \t]*(?:\n|$)")


def math_steps(latex: str) -> tuple[str, str]:
    """Display math `latex` without Slidev's click steps (`$$ {1|3|all}`), and those steps.

    Slidev highlights the lines of each step in turn; Deckyard shows every line, as Slidev
    does once all clicks are done. Math without steps comes back as it was, with "".
    """
    found = _MATH_STEPS.match(latex)
    if found is None or not all(_RANGE.match(p) for p in found.group("steps").split("|")):
        return latex, ""
    return latex[found.end() :], found.group("steps").strip()


def mathml_latex(latex: str, *, display: bool) -> str:
    """`latex` as latex2mathml takes it: display math without Slidev's click steps
    (`$$ {1|3|all}`), `aligned` as `split`.

    latex2mathml has no `aligned` environment (it would run the lines together); `split` is
    the same right-left alignment, which it does have.
    """
    latex = math_steps(latex)[0] if display else latex
    return re.sub(r"\\(begin|end)\{aligned\}", r"\\\1{split}", latex)


_COLUMN_ALIGN = re.compile(r'<mtd columnalign="(left|right)"')


def aligned_cells(mathml: str) -> str:
    """latex2mathml's table cells aligned in Chromium too: MathML Core has no `columnalign`,
    so an `aligned` block's two columns would each be centred, the `=` adrift; the columns
    of a right-left pair meet, as in KaTeX."""
    return _COLUMN_ALIGN.sub(
        lambda m: f'<mtd columnalign="{m[1]}" style="text-align: {m[1]}; padding-inline: 0"',
        mathml,
    )


_MATH_BLOCK = math_block_dollar(allow_labels=False, allow_blank_lines=True)


def _interrupting_math(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """mdit-py-plugins' `$$` block rule, able to end a paragraph: asked whether it would start
    (`silent`), it answers without adding the block, which the plugin's own rule does not."""
    if not silent:
        return bool(_MATH_BLOCK(state, start, end, False))
    tokens, line = len(state.tokens), state.line
    found = bool(_MATH_BLOCK(state, start, end, False))
    del state.tokens[tokens:]
    state.line = line
    return found


def math_interrupts_paragraphs(md: MarkdownIt) -> None:
    """Let `md`'s `$$` blocks (mdit-py-plugins' dollarmath) end a paragraph, as in Slidev."""
    md.block.ruler.at(
        "math_block", _interrupting_math, {"alt": ["paragraph", "reference", "blockquote"]}
    )
