"""Converts a Marp deck with Marp's own engine, `@marp-team/marp-core`, in one Node process.

`scripts/setup` installs marp-core (pinned to the version Marp CLI 4.5.1 uses) into
`vendor/js/`, next to Mermaid; `vendor/js/marp_convert.cjs` reads the deck's Markdown and theme
CSS as JSON on stdin and answers JSON: marp-core's CSS, each slide's `<svg><section>` with its
size and speaker notes, and marp-core's browser script (it fits `<!--fit-->` headings). The
conversion is a Markdown-to-HTML/CSS transform: nothing of the deck runs here. Without Node or
the package, the deck is refused with a message saying how to install them, never a trace.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code

VENDOR_JS = Path(__file__).resolve().parents[4] / "vendor" / "js"
CONVERT_SCRIPT = VENDOR_JS / "marp_convert.cjs"
MARP_PACKAGE = VENDOR_JS / "node_modules" / "@marp-team" / "marp-core" / "package.json"
_INSTALL = "install Node.js and run scripts/setup (npm ci --prefix vendor/js)"


@dataclass(frozen=True)
class MarpSlide:
    """One slide as marp-core renders it: its `<svg data-marpit-svg>` markup, size and notes."""

    html: str
    width: int
    height: int
    notes: list[str]


@dataclass(frozen=True)
class MarpOutput:
    """A whole deck converted: marp-core's CSS (every theme and style), slides, browser script."""

    css: str
    slides: list[MarpSlide]
    script: str


class NodeScriptFailed(Exception):
    """A vendored Node script did not answer: why, in a few words."""


def run_node_json(node: str, script: Path, payload: str, *, timeout: float) -> dict[str, Any]:
    """Run `script` of vendor/js with `payload` on stdin; its JSON object answer on stdout.

    Raises `NodeScriptFailed` when it cannot start, times out, or answers anything but a JSON
    object (with the last line it wrote to stderr)."""
    try:
        done = subprocess.run(
            [node, str(script)],
            input=payload.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            cwd=VENDOR_JS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise NodeScriptFailed(f"it took longer than {timeout:g} s") from None
    except OSError as exc:
        raise NodeScriptFailed(f"node could not be started ({exc.strerror})") from None
    try:
        answer = json.loads(done.stdout.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise NodeScriptFailed(f"node exited with {done.returncode}: {last[0]}") from None
    if not isinstance(answer, dict):
        raise NodeScriptFailed("an unexpected answer")
    return answer


def node_executable() -> str | None:
    """The `node` on PATH, or None."""
    return shutil.which("node")


def marp_available() -> bool:
    """Whether Node and the vendored marp-core are installed."""
    return node_executable() is not None and MARP_PACKAGE.is_file() and CONVERT_SCRIPT.is_file()


def _failed(filename: str, why: str) -> DeckSourceError:
    return DeckSourceError(
        Code.MARP_FAILED, f"{filename}: Marp could not convert the deck: {why}", file=filename
    )


def _slide(raw: Any) -> MarpSlide:
    notes = [str(c).strip() for c in raw.get("comments", []) if str(c).strip()]
    return MarpSlide(str(raw["html"]), int(raw["width"]), int(raw["height"]), notes)


def convert_marp(
    markdown: str,
    themes: list[str],
    *,
    default_theme: int | None,
    filename: str,
    allow_html: bool,
    timeout: float,
) -> MarpOutput:
    """`markdown` converted by marp-core with `themes` (the deck's theme CSS files).

    Like Marp CLI's `--theme-set`, each of `themes` with a `@theme` name may be chosen by the
    deck; `themes[default_theme]` is the theme of a deck naming none (Marp CLI's `--theme`).

    `allow_html` keeps Marp CLI's default: marp-core's allow-list of HTML elements (no
    scripts, no event attributes); without it, HTML in the deck is shown as text.
    Raises `DeckSourceError` (`DECK_MARP_UNAVAILABLE`, `DECK_MARP_FAILED`).
    """
    node = node_executable()
    if node is None or not MARP_PACKAGE.is_file() or not CONVERT_SCRIPT.is_file():
        missing = "Node.js (node)" if node is None else "the @marp-team/marp-core package"
        raise DeckSourceError(
            Code.MARP_UNAVAILABLE,
            f"{filename} is a Marp deck, rendered by Marp's own engine, but {missing} is "
            f"not installed: {_INSTALL}",
            file=filename,
        )
    payload = json.dumps(
        {
            "markdown": markdown,
            "themes": themes,
            "defaultTheme": default_theme,
            "html": allow_html,
        }
    )
    try:
        answer = run_node_json(node, CONVERT_SCRIPT, payload, timeout=timeout)
    except NodeScriptFailed as exc:
        raise _failed(filename, str(exc)) from None
    if "error" in answer:
        raise _failed(filename, str(answer["error"]))
    try:
        slides = [_slide(raw) for raw in answer["slides"]]
        return MarpOutput(str(answer["css"]), slides, str(answer["script"]))
    except (KeyError, TypeError, ValueError, AttributeError):
        raise _failed(filename, "an unexpected answer") from None
