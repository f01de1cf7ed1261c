"""reveal.js's Math plugin gets the vendored KaTeX, never a CDN's (reveal_math.py)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from bs4 import BeautifulSoup

from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck_report
from deckyard.decks.source.assemble import ASSETS_DIR
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.reveal_math import KATEX_DIR, MATHJAX_WARNING, with_math
from tests.helpers.reveal import ROOT, reveal_deck

MATH_FIXTURE = ROOT / "tests" / "fixtures" / "reveal_math"
LIMITS = DeckLimits.from_settings(Settings.load())


def _scripts(document: str) -> list[str]:
    """The text of every script of a compiled page, the inlined `data:` ones decoded."""
    out: list[str] = []
    for script in BeautifulSoup(document, "html5lib").find_all("script"):
        src = str(script.get("src", ""))
        if src.startswith("data:") and ";base64," in src:
            out.append(base64.b64decode(src.split(",", 1)[1]).decode("utf-8"))
        else:
            out.append(str(script.string or ""))
    return out


def test_a_katex_deck_compiles_with_katex_inlined_and_no_cdn(tmp_path: Path) -> None:
    source = load_deck_folder(reveal_deck(tmp_path / "talk", MATH_FIXTURE), LIMITS)
    assert source.warnings == []
    assets = {a for a in source.assets if a.startswith(ASSETS_DIR + KATEX_DIR)}
    fonts = {a for a in assets if "/fonts/" in a}
    assert fonts and all(a.endswith(".woff2") for a in fonts)  # woff2 only: a third the bytes
    report = compile_deck_report(source, LIMITS)
    assert report.problems == []
    assert len(report.pages) == 2
    document = report.pages[0].document
    scripts = _scripts(document)
    order = [i for i, s in enumerate(scripts) if "renderMathInElement" in s or "RevealMath" in s]
    assert order, "KaTeX, auto-render and the plugin's replacement are on the page"
    katex_at = next(i for i, s in enumerate(scripts) if "katex" in s and "version" in s)
    replaced_at = next(i for i, s in enumerate(scripts) if "RevealMath.KaTeX = " in s)
    deck_at = next(i for i, s in enumerate(scripts) if "Reveal.initialize({ plugins" in s)
    assert katex_at < replaced_at < deck_at  # loaded and swapped in before the deck starts
    # KaTeX's fonts are inlined in the page's CSS: nothing refers to a file or a CDN.
    assert re.search(r"font-family:\s*KaTeX_Main", document)
    assert "url(fonts/" not in document
    assert "cdn.jsdelivr.net" not in "".join(s for s in scripts if "RevealMath.KaTeX = " in s)


def test_the_tags_go_on_the_plugins_line_and_a_deck_without_the_plugin_is_left_alone() -> None:
    html = (MATH_FIXTURE / "index.html").read_text()
    text, assets, warnings = with_math(html, "index.html")
    assert text.count("\n") == html.count("\n")  # problems keep their line numbers
    assert warnings == []
    assert KATEX_DIR + "katex.min.js" in assets
    assert KATEX_DIR + "contrib/mhchem.min.js" not in assets  # only when the deck names it
    plain = html.replace('<script src="dist/plugin/math.js"></script>', "")
    assert with_math(plain, "index.html") == (plain, {}, [])


def test_a_mathjax_deck_is_warned_about_and_gets_no_katex(tmp_path: Path) -> None:
    folder = reveal_deck(tmp_path / "talk", MATH_FIXTURE)
    index = folder / "index.html"
    index.write_text(index.read_text().replace("RevealMath.KaTeX", "RevealMath.MathJax3"))
    source = load_deck_folder(folder, LIMITS)
    assert [(w.file, w.line, w.message) for w in source.warnings] == [
        ("index.html", 23, MATHJAX_WARNING)
    ]
    assert "not vendored" in source.warnings[0].describe()
    assert not any(a.endswith("katex.min.js") for a in source.assets)
    report = compile_deck_report(source, LIMITS)
    assert report.problems == []
    replaced = [s for s in _scripts(report.pages[0].document) if "RevealMath.MathJax3 = " in s]
    assert replaced, "the MathJax plugin is replaced by one that loads nothing"
