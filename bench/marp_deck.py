"""Writes the same generated slides as a Marp Markdown deck and as a Deckyard deck folder.

Each slide has a heading and a bullet list with inline code, CJK text and emoji; every fourth
slide adds, in turn, an image, a table, a code block or a quote. Both decks are 1280x720 and use
only local files and the machine's fonts (Noto CJK, Noto Color Emoji), so neither tool needs the
network: Marp's Twemoji images (fetched from a CDN by default) are turned off in its config.

    python bench/marp_deck.py --slides 30 --out /tmp/decks
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

WIDTH, HEIGHT = 1280, 720
IMAGE = "assets/img/chart.svg"
_SVG = f"""<svg xmlns="http://www.w3.org/2000/svg" width="360" height="200" viewBox="0 0 360 200">
<rect width="360" height="200" rx="16" fill="#0b1f3a"/>
{
    "".join(
        f'<rect x="{30 + i * 64}" y="{170 - h}" width="40" height="{h}" fill="#f5a623"/>'
        for i, h in enumerate((40, 70, 95, 130, 150))
    )
}
<text x="20" y="34" font-family="sans-serif" font-size="22" fill="#fff">Growth</text>
</svg>
"""
_EXTRAS = ("image", "table", "code", "quote")
# Roughly Marp's default theme, so both tools lay out and paint comparable slides.
_THEME = """.slide {
  box-sizing: border-box;
  padding: 78px;
  color: #24292f;
  background: #fff;
  font-family: "Noto Sans", "Noto Sans CJK SC", "Noto Color Emoji", sans-serif;
  font-size: 35px;
  line-height: 1.45;
}
.slide h2 { font-size: 1.5em; margin: 0 0 0.5em; }
.slide code { font-family: "Noto Sans Mono", monospace; background: #eff1f3; padding: 0.1em 0.2em; }
.slide pre { background: #f6f8fa; padding: 0.6em; font-size: 0.7em; }
.slide table { border-collapse: collapse; }
.slide th, .slide td { border: 1px solid #d0d7de; padding: 0.2em 0.6em; }
.slide blockquote {
  border-left: 0.25em solid #d0d7de; color: #57606a; margin: 0; padding-left: 1em;
}
"""
# Marp CLI's config: local files allowed (the image), no Twemoji CDN images, default theme.
_MARP_CONFIG = """allowLocalFiles: true
options:
  emoji:
    shortcode: false
    unicode: false
"""


@dataclass(frozen=True)
class Decks:
    """Where the two forms of the same deck were written."""

    slides: int
    marp_markdown: Path
    marp_config: Path
    deckyard_folder: Path


def extra(kind: str, n: int) -> str:
    """The Markdown a fourth slide adds: an image, a table, a code block or a quote."""
    if kind == "image":
        return f"![chart]({IMAGE})\n"
    if kind == "table":
        return (
            "| quarter | renders | 状态 |\n|---|---|---|\n"
            f"| Q{n % 4 + 1} | {n * 120} | ✅ |\n| Q{(n + 1) % 4 + 1} | {n * 95} | 🚧 |\n"
        )
    if kind == "code":
        return (
            "```python\n"
            f"def render(page: int = {n}) -> str:\n"
            '    return f"slide {page} 渲染完成"\n'
            "```\n"
        )
    return f"> Slide {n}: 好的工具让人专注于内容。 ✨\n"


def slide(n: int) -> str:
    """Slide `n` (1-based) as Markdown."""
    body = (
        f"## Slide {n}: 发布流程 🚀\n\n"
        f"- Run `deckyard render deck-{n}` and check the output\n"
        f"- 中文内容 第 {n} 页的要点 📈\n"
        f"- Inline `code` with emoji 🎉 and `--flag={n}`\n"
    )
    if n % 4 == 0:
        body += "\n" + extra(_EXTRAS[(n // 4 - 1) % len(_EXTRAS)], n)
    return body


def write_decks(slides: int, root: Path) -> Decks:
    """Write both forms of a `slides`-slide deck under `root` (`marp/`, `deckyard/`)."""
    marp = root / "marp"
    deck = root / "deckyard"
    for base in (marp, deck):
        (base / "assets" / "img").mkdir(parents=True, exist_ok=True)
        (base / IMAGE).write_text(_SVG, encoding="utf-8")
    texts = [slide(n) for n in range(1, slides + 1)]
    front = f"---\nmarp: true\ntheme: default\nsize: 16:9\ntitle: Bench deck ({slides})\n---\n\n"
    (marp / "deck.md").write_text(front + "\n---\n\n".join(texts), encoding="utf-8")
    (marp / "marp.yml").write_text(_MARP_CONFIG, encoding="utf-8")
    pages = deck / "pages"
    pages.mkdir(exist_ok=True)
    names = []
    for n, text in enumerate(texts, start=1):
        name = f"{n:03d}-slide.md"
        (pages / name).write_text(text, encoding="utf-8")
        names.append(name)
    listed = ",\n".join(f'  "{name}"' for name in names)
    (deck / "theme.css").write_text(_THEME, encoding="utf-8")
    (deck / "deck.toml").write_text(
        f'title = "Bench deck ({slides})"\nlang = "en"\ntheme = "theme.css"\n'
        f"pages = [\n{listed},\n]\n\n"
        f"[slide]\nwidth = {WIDTH}\nheight = {HEIGHT}\n",
        encoding="utf-8",
    )
    return Decks(slides, marp / "deck.md", marp / "marp.yml", deck)


def main() -> None:
    """Write the decks named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides", type=int, default=30)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    decks = write_decks(args.slides, args.out)
    print(decks.marp_markdown, decks.deckyard_folder)


if __name__ == "__main__":
    main()
