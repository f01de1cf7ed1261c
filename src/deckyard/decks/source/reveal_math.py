"""reveal.js's Math plugin with KaTeX from the vendored npm package, never from a CDN.

The plugin (`plugin/math.js`) loads KaTeX, or MathJax, by URL once reveal.js starts: from
cdn.jsdelivr.net, or with `katex.local` from `<local>/dist/...` beside the deck. A document
render has no network and serves no files (the compiler inlines every reference as a `data:`
URI), so both failed every slide. A deck that loads the plugin therefore gets, right after the
plugin's `<script>`, KaTeX's script, its auto-render extension (and mhchem, when the deck names
it) and its stylesheet as ordinary tags the compiler inlines, taken from
`vendor/js/node_modules/katex` (pinned in `vendor/js/package.json`) as assets under
`_deckyard/katex/`; the stylesheet keeps only its woff2 fonts, which every browser we run reads.
Then a script of ours replaces `RevealMath.KaTeX` with a plugin that renders with that KaTeX
as the original does (its delimiters and ignored tags, the deck's `katex` options over them,
`local` and `version` ignored) once reveal.js is ready. Replacing the plugin rather than
pointing `katex.local` at our copy, or rewriting the CDN URL in the deck's `math.js`: both of
those still load files by URL, which nothing serves, and no `data:` URI works as a URL prefix.
The replacement depends only on the name `RevealMath.KaTeX` and reveal.js's plugin API.

MathJax is not vendored: the MathJax plugins become plugins that do nothing, so a slide shows
its TeX source instead of failing on a blocked request, and the deck gets a warning.
The tags go on the plugin's own line of the page, so problems keep their line numbers.
"""

from __future__ import annotations

import re
from functools import lru_cache

from deckyard.decks.source.deck_source import SourceWarning
from deckyard.decks.source.marp_engine import VENDOR_JS

KATEX_DIST = VENDOR_JS / "node_modules" / "katex" / "dist"
KATEX_DIR = "_deckyard/katex/"
"""Where, among a deck's assets (relative to the deck's root), the vendored KaTeX goes."""
MATH_PLUGIN = re.compile(
    r"""<script\b[^>]*\bsrc\s*=\s*["'][^"']*plugin/math(?:/math)?(?:\.min)?\.js["'][^>]*>"""
    r"""\s*</script\s*>""",
    re.IGNORECASE,
)
"""The `<script>` that loads reveal.js's Math plugin (`dist/plugin/math.js`; reveal.js 4:
`plugin/math/math.js`)."""
_MATHJAX = re.compile(r"\bRevealMath\s*(?:\.\s*MathJax\d|[,\]])")
_WEAK_FONTS = re.compile(r""",url\(fonts/[^)]+\.(?:woff|ttf)\) format\("(?:woff|truetype)"\)""")
_FONT = re.compile(r"url\((fonts/[^)]+\.woff2)\)")
MATHJAX_WARNING = (
    "reveal.js's Math plugin with MathJax: MathJax is not vendored; math shows as TeX source "
    "(RevealMath.KaTeX renders it)"
)

PLUGIN_SCRIPT = r"""(() => {
  if (typeof RevealMath === 'undefined') return;
  const defaults = {
    delimiters: [
      { left: '$$', right: '$$', display: true },
      { left: '$', right: '$', display: false },
      { left: '\\(', right: '\\)', display: false },
      { left: '\\[', right: '\\]', display: true },
    ],
    ignoredTags: ['script', 'noscript', 'style', 'textarea', 'pre', 'code'],
  };
  RevealMath.KaTeX = () => ({
    id: 'katex',
    init: (deck) => {
      const { local, version, extensions, ...options } = {
        ...defaults, ...(deck.getConfig().katex || {}),
      };
      const render = () => {
        if (typeof renderMathInElement !== 'function') return;
        renderMathInElement(deck.getSlidesElement(), options);
        deck.layout();
      };
      if (deck.isReady()) render(); else deck.on('ready', render);
    },
  });
  const inert = (id) => () => ({ id, init: () => {} });
  RevealMath.MathJax2 = inert('mathjax2');
  RevealMath.MathJax3 = inert('mathjax3');
  RevealMath.MathJax4 = inert('mathjax4');
  RevealMath.init = () => {};  // RevealMath itself is the MathJax 2 plugin
})();
"""


@lru_cache(maxsize=1)
def _katex_files() -> dict[str, bytes]:
    """The vendored KaTeX files a deck needs, by path under `KATEX_DIR` ({} when not installed)."""
    try:
        css = (KATEX_DIST / "katex.min.css").read_text(encoding="utf-8")
        files = {
            "katex.min.js": (KATEX_DIST / "katex.min.js").read_bytes(),
            "contrib/auto-render.min.js": (KATEX_DIST / "contrib/auto-render.min.js").read_bytes(),
            "contrib/mhchem.min.js": (KATEX_DIST / "contrib/mhchem.min.js").read_bytes(),
        }
        css = _WEAK_FONTS.sub("", css)
        files["katex.min.css"] = css.encode("utf-8")
        for font in sorted(set(_FONT.findall(css))):
            files[font] = (KATEX_DIST / font).read_bytes()
    except OSError:
        return {}
    return files


def with_math(text: str, filename: str) -> tuple[str, dict[str, bytes], list[SourceWarning]]:
    """`text` (a reveal.js deck page) with the Math plugin made to work without network.

    Returns the page text, the assets to add (deck-root relative paths) and warnings; a deck
    without the plugin comes back as it was, with none.
    """
    plugin = MATH_PLUGIN.search(text)
    if plugin is None:
        return text, {}, []
    line = text.count("\n", 0, plugin.start()) + 1
    warnings: list[SourceWarning] = []
    mathjax = _MATHJAX.search(text)
    if mathjax is not None:
        at = text.count("\n", 0, mathjax.start()) + 1
        warnings.append(SourceWarning(file=filename, line=at, message=MATHJAX_WARNING))
    assets = {KATEX_DIR + "reveal-katex.js": PLUGIN_SCRIPT.encode("utf-8")}
    tags = [f'<script src="{KATEX_DIR}reveal-katex.js"></script>']
    if "KaTeX" in text:
        vendored = _katex_files()
        if not vendored:
            warnings.append(
                SourceWarning(
                    file=filename,
                    line=line,
                    message="KaTeX is not installed (scripts/setup installs vendor/js); "
                    "math shows as TeX source",
                )
            )
        else:
            wanted = ["katex.min.js"] + ["contrib/mhchem.min.js"] * ("mhchem" in text)
            wanted.append("contrib/auto-render.min.js")
            assets.update({KATEX_DIR + p: b for p, b in vendored.items() if p.endswith(".woff2")})
            assets.update({KATEX_DIR + p: vendored[p] for p in [*wanted, "katex.min.css"]})
            tags[:0] = [f'<link rel="stylesheet" href="{KATEX_DIR}katex.min.css">'] + [
                f'<script src="{KATEX_DIR}{p}"></script>' for p in wanted
            ]
    end = plugin.end()
    return text[:end] + "".join(tags) + text[end:], assets, warnings
