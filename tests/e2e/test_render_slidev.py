"""`deckyard render slides.md` of a Slidev deck: every slide drawn, every gap a warning."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PIL import Image, ImageStat

from tests.e2e.test_render_cli import png_size, run

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

DECK = Path(__file__).parents[1] / "fixtures" / "markdown_decks" / "slidev_deck"


def _brightness(path: Path) -> float:
    with Image.open(path) as image:
        return float(ImageStat.Stat(image.convert("L")).mean[0])


def test_a_slidev_deck_renders_every_slide_and_names_what_it_leaves_out(tmp_path: Path) -> None:
    deck = tmp_path / "deck"
    shutil.copytree(DECK, deck)
    out = tmp_path / "out"
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = run(
        tmp_path, "render", str(deck / "slides.md"), "--out", str(out), "--format", "png", env=env
    )
    said = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stdout + done.stderr
    pngs = sorted((out / "pages").glob("*.png"))
    # the front matter with dragPos is settings, not a slide; src: brings in two slides
    assert [p.name for p in pngs] == [f"0{i}-slide-0{i}.png" for i in range(1, 7)]
    assert all(png_size(p) == (1920, 1080) for p in pngs)
    for warning in (
        "slides.md:12 (slide 2): slide front matter 'dragPos', 'transition' has no effect",
        "pages/imported.md:2 (slide 4): slide front matter 'clicks' has no effect",
        "slides.md:36 (slide 6): Vue script is not run",
        "slides.md:41 (slide 6): the icon uim:rocket is not available; it is left out",
        "slides.md:1: Slidev's theme 'seriph' is not vendored; the slides use Slidev's default",
    ):
        assert warning in said, said
    assert "UnoCSS" not in said  # Slidev's own UnoCSS builds the utility classes
    assert "carbon" not in said and "mdi" not in said  # the vendored icons are drawn
    assert "Mermaid" not in said  # the diagram is drawn too
    assert all(_brightness(p) < 60 for p in pngs)  # colorSchema: dark
