"""The names of the built-in themes, and the closest built-in for another tool's theme name.

Kept in the source stage so a deck's `theme = "dark"` (or Marp's `theme: gaia`) is understood
while loading; the stylesheets themselves are in `decks/compile/themes.py`.
"""

from __future__ import annotations

BUILTIN_THEMES: dict[str, str] = {"default": "friendly", "dark": "github-dark"}
"""Each built-in theme and the Pygments style its code blocks use."""

THEME_ALIASES: dict[str, str] = {
    "gaia": "default",
    "uncover": "default",
    "seriph": "default",
    "apple-basic": "default",
    "bricks": "default",
    "shibainu": "default",
    "white": "default",
    "beige": "default",
    "serif": "default",
    "simple": "default",
    "sky": "default",
    "solarized": "default",
    "black": "dark",
    "night": "dark",
    "league": "dark",
    "moon": "dark",
    "blood": "dark",
    "dracula": "dark",
}


def is_builtin_theme(name: str) -> bool:
    """Whether `name` is a built-in theme or another tool's theme name that maps to one."""
    key = name.strip().lower()
    return key in BUILTIN_THEMES or key in THEME_ALIASES


def builtin_name(name: str, tool: str | None = None) -> tuple[str, str | None]:
    """The built-in theme for `name` and, when `name` is another tool's theme, a note.

    `tool` names the convention of the deck (`Marp`): its `default` theme is not Deckyard's,
    so that mapping gets a note too.
    """
    key = name.strip().lower()
    if key == "default" and tool is not None:
        return key, f"{tool}'s theme {name!r} is shown with Deckyard's built-in {key!r} theme"
    if key in BUILTIN_THEMES:
        return key, None
    target = THEME_ALIASES.get(key, "default")
    return target, f"theme {name!r} is shown with Deckyard's built-in {target!r} theme"
