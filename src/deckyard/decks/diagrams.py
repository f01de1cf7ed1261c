"""Mermaid, the diagram renderer a compiled page carries inline when a slide has a diagram.

`scripts/setup` installs the `mermaid` npm package (`vendor/js/package.json`, pinned by its
lock file) into the checkout; a page whose Markdown has a ```` ```mermaid ```` fence gets that
package's browser bundle inline, plus a few lines that draw every diagram before the page's
`load` event (mermaid's `run` settles in microtasks once the bundle is parsed), so the renderer
needs no network and no change. Without the package (a wheel install without the checkout), a
diagram stays code and the source scan says so.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

MERMAID_BUNDLE = (
    Path(__file__).resolve().parents[3]
    / "vendor"
    / "js"
    / "node_modules"
    / "mermaid"
    / "dist"
    / "mermaid.min.js"
)
MERMAID_CLASS = "dy-mermaid"
_RUN = """
(() => {
  const light = (el) => {
    const c = (getComputedStyle(el).color.match(/[\\d.]+/g) || ['0', '0', '0']).map(Number);
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2] > 140;
  };
  for (const pre of document.querySelectorAll('pre.dy-mermaid')) {
    if (light(pre)) pre.textContent = "%%{init: {'theme': 'dark'}}%%\\n" + pre.textContent;
  }
  const style = getComputedStyle(document.querySelector('pre.dy-mermaid') || document.body);
  const scale = parseFloat(style.fontSize) / 16;
  mermaid.initialize({
    startOnLoad: false,
    securityLevel: 'strict',
    fontFamily: style.fontFamily,
    themeVariables: { fontFamily: style.fontFamily },
  });
  // Mermaid sizes a diagram for 16px text; the slide's text is larger, so is the diagram.
  mermaid.run({ querySelector: 'pre.dy-mermaid' }).then(() => {
    for (const svg of document.querySelectorAll('pre.dy-mermaid > svg')) {
      const natural = parseFloat(svg.style.maxWidth) || svg.viewBox.baseVal.width;
      if (natural) svg.style.maxWidth = `min(100%, ${natural * scale}px)`;
    }
  });
})();
"""


@lru_cache(maxsize=1)
def mermaid_bundle() -> str | None:
    """Mermaid's browser bundle, safe to put in a `<script>` element; None when not installed."""
    try:
        text = MERMAID_BUNDLE.read_text(encoding="utf-8")
    except OSError:
        return None
    return text.replace("</script", "<\\/script")


def mermaid_available() -> bool:
    """Whether diagrams are drawn (the package is installed) rather than shown as code."""
    return mermaid_bundle() is not None


def mermaid_scripts() -> str:
    """The `<script>` elements that draw a document's diagrams ("" when not installed)."""
    bundle = mermaid_bundle()
    if bundle is None:
        return ""
    return f"<script>{bundle}</script>\n<script>{_RUN}</script>\n"
