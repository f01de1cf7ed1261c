"""Builds a Slidev deck's stylesheet with Slidev's own packages, in one Node process.

`scripts/setup` installs `@slidev/client` and `@slidev/theme-default` (with the UnoCSS that
Slidev 53 uses) into `vendor/js/`; `vendor/js/slidev_styles.cjs` reads the deck's Markdown and
`fonts` setting as JSON on stdin and answers the CSS Slidev's client loads for those slides:
UnoCSS with Slidev's `uno.config.ts` over the deck's text, Slidev's and the theme's style
sheets. The deck's Markdown is only scanned for class names: nothing of the deck runs, and no
package of the deck is installed. Without Node or the packages, `SlidevUnavailable` says how
to install them and the caller falls back to Deckyard's own look, with a warning.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from deckyard.decks.source.marp_engine import (
    VENDOR_JS,
    NodeScriptFailed,
    node_executable,
    run_node_json,
)

STYLES_SCRIPT = VENDOR_JS / "slidev_styles.cjs"
CLIENT_PACKAGE = VENDOR_JS / "node_modules" / "@slidev" / "client" / "package.json"
THEME_PACKAGE = VENDOR_JS / "node_modules" / "@slidev" / "theme-default" / "package.json"
INSTALL = "install Node.js and run scripts/setup (npm ci --prefix vendor/js)"


class SlidevUnavailable(Exception):
    """Slidev's styles could not be built; the message says why, for a warning."""


def slidev_available() -> bool:
    """Whether Node and the vendored Slidev packages are installed."""
    return (
        node_executable() is not None
        and CLIENT_PACKAGE.is_file()
        and THEME_PACKAGE.is_file()
        and STYLES_SCRIPT.is_file()
    )


def slidev_css(content: list[str], fonts: Mapping[str, Any] | None, *, timeout: float) -> str:
    """The CSS Slidev gives slides whose text is `content`, with the deck's `fonts` setting.

    Raises `SlidevUnavailable` when Node or the packages are missing, or the build fails.
    """
    node = node_executable()
    if node is None or not slidev_available():
        missing = "Node.js (node)" if node is None else "the @slidev/client package"
        raise SlidevUnavailable(f"{missing} is not installed: {INSTALL}")
    payload = json.dumps({"content": content, "fonts": dict(fonts) if fonts else None})
    try:
        answer = run_node_json(node, STYLES_SCRIPT, payload, timeout=timeout)
    except NodeScriptFailed as exc:
        raise SlidevUnavailable(f"building its styles failed: {exc}") from None
    if not isinstance(answer.get("css"), str):
        raise SlidevUnavailable(str(answer.get("error") or "an unexpected answer"))
    return str(answer["css"])
