"""Writes deck folders: a new one (`deckyard init`) or one converted from a Markdown deck.

`import_markdown_deck` turns a Marp, Slidev or reveal.js `.md` into `deck.toml`, one
`pages/slide-NN.md` per slide (with its resolved directives) and `assets/`: the deck's own
`assets/` folder, plus local files the slides refer to elsewhere (`images/x.png`, Slidev's
`public/`), copied under `assets/` with the references rewritten. Remote references are not
fetched unless the caller passes a fetcher (`deckyard import --fetch-remote`, through the
SSRF guard of URL renders); each one left is reported, as is everything else not carried over.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.folder import load_markdown_file
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.references import REFERENCE, is_remote_load, rewrite_local

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")

Fetch = Callable[[str], bytes]
"""Downloads one remote reference (through the SSRF guard); raises `FetchRefused`."""


class FetchRefused(Exception):
    """A remote reference that was not downloaded, and why."""


def _remote_target(url: str) -> str:
    parts = urlsplit(url if "://" in url else "https:" + url)
    host = _SAFE_NAME.sub("-", parts.hostname or "host")
    name = _SAFE_NAME.sub("-", posixpath.basename(parts.path) or "index")
    return f"assets/remote/{host}/{name}"


@dataclass
class ImportReport:
    """What an import wrote, copied, and could not carry over."""

    pages: list[str] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _manifest(deck: DeckSource, theme: str | None) -> str:
    lines = [
        f"title = {_toml_string(deck.manifest.title)}",
        f"lang = {_toml_string(deck.manifest.lang)}",
    ]
    if deck.manifest.author:
        lines.append(f"author = {_toml_string(deck.manifest.author)}")
    if theme:
        lines.append(f"theme = {_toml_string(theme)}")
    lines += ["", "[slide]", f"width = {deck.width}", f"height = {deck.height}", ""]
    text = "\n".join(lines)
    tomllib.loads(text)
    return text


def _carry_references(
    text: str,
    source_dir: Path,
    dest: Path,
    report: ImportReport,
    page: str,
    fetch: Fetch | None,
) -> str:
    def fetch_remote(match: re.Match[str]) -> str:
        ref = match.group("ref")
        if not is_remote_load(match):
            return match.group(0)
        if fetch is None:
            report.not_carried.append(
                f"{page}: remote {ref} is not fetched; download it into assets/ "
                "(or import with --fetch-remote)"
            )
            return match.group(0)
        target = _remote_target(ref)
        try:
            data = fetch(ref)
        except FetchRefused as exc:
            report.not_carried.append(f"{page}: remote {ref} was not fetched: {exc}")
            return match.group(0)
        (dest / target).parent.mkdir(parents=True, exist_ok=True)
        (dest / target).write_bytes(data)
        report.copied.append(target)
        return match.group("lead") + target

    def copy(target: str, file: Path) -> None:
        if target not in report.copied:
            (dest / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, dest / target)
            report.copied.append(target)

    return rewrite_local(REFERENCE.sub(fetch_remote, text), source_dir, copy)


def import_markdown_deck(
    source: Path, dest: Path, limits: DeckLimits, fetch: Fetch | None = None
) -> ImportReport:
    """Convert the Markdown deck `source` into the deck folder `dest` (new or empty).

    With `fetch`, remote images (not hyperlinks) are downloaded into `assets/remote/<host>/`.
    """
    deck = load_markdown_file(source, limits, sourced=False)
    report = ImportReport(not_carried=[w.describe() for w in deck.warnings])
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "pages").mkdir(exist_ok=True)
    assets = source.parent / "assets"
    if assets.is_dir():
        shutil.copytree(assets, dest / "assets", dirs_exist_ok=True, symlinks=False)
        report.copied += sorted(p for p in deck.assets if (source.parent / p).is_file())
    for path, asset in deck.assets.items():
        # local files outside assets/ the slides refer to, read (and the references
        # rewritten) by `load_markdown_file`
        if not (dest / path).exists():
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            (dest / path).write_bytes(asset.data)
            report.copied.append(path)
    theme: str | None = None
    if deck.theme_path is not None:
        theme = deck.theme_path
        (dest / theme).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.parent / theme, dest / theme)
    elif deck.theme_css.strip():
        builtin = re.fullmatch(r'@import "(\w+)";\s*', deck.theme_css)
        if builtin:
            theme = builtin.group(1)
        else:
            theme = "theme.css"
            (dest / theme).write_text(deck.theme_css, encoding="utf-8")
    (dest / "deck.toml").write_text(_manifest(deck, theme), encoding="utf-8")
    for page in deck.pages:
        text = _carry_references(page.text, source.parent, dest, report, page.name, fetch)
        (dest / "pages" / f"{page.name}.md").write_text(text, encoding="utf-8")
        report.pages.append(f"pages/{page.name}.md")
    report.copied = [posixpath.normpath(p) for p in dict.fromkeys(report.copied)]
    return report


_INIT_PAGES = {
    "01-title.md": "<!-- _class: lead -->\n\n# {title}\n\nA Deckyard deck\n\n"
    "<!-- Speaker notes go in comments like this one. -->\n",
    "02-content.md": "## What it shows\n\n- Markdown pages with the built-in theme\n"
    "- Code, highlighted when the deck is compiled:\n\n```python\nprint('hello')\n```\n\n"
    "- Math as MathML: $e^{{i\\pi}} + 1 = 0$\n- Links: [Deckyard](https://example.org)\n",
    "03-end.html": '<section style="display:grid;place-items:center;height:100%">\n'
    "  <h1>Thank you</h1>\n</section>\n",
}


def init_deck(dest: Path, title: str) -> list[str]:
    """Write a new deck folder at `dest` (new or empty); the files written."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "pages").mkdir(exist_ok=True)
    (dest / "assets").mkdir(exist_ok=True)
    manifest = f'title = {_toml_string(title)}\ntheme = "default"\n\n[slide]\n'
    manifest += "width = 1920\nheight = 1080\n"
    tomllib.loads(manifest)
    (dest / "deck.toml").write_text(manifest, encoding="utf-8")
    written = ["deck.toml"]
    for name, text in _INIT_PAGES.items():
        page = text.replace("{title}", title).replace("{{", "{").replace("}}", "}")
        (dest / "pages" / name).write_text(page, encoding="utf-8")
        written.append(f"pages/{name}")
    return written
