"""`deckyard render talk.md`: a one-file Markdown deck end to end, and a clean output folder."""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from deckyard.cli.schema_template import template_path
from tests.e2e.test_render_cli import png_size, run

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

FIXTURES = Path(__file__).parents[1] / "fixtures" / "markdown_decks"


def test_a_markdown_deck_renders_one_png_per_slide_into_a_clean_folder(tmp_path: Path) -> None:
    deck = tmp_path / "talk"
    shutil.copytree(FIXTURES, deck)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = tmp_path / "out"
    done = run(tmp_path, "render", str(deck / "marp.md"), "--out", str(out), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: marp.md:1: the theme's remote stylesheet" in done.stdout.replace("\n", " ")
    pngs = sorted((out / "pages").glob("*.png"))
    assert [p.name for p in pngs] == [f"0{i}-slide-0{i}.png" for i in range(1, 5)]
    assert all(png_size(p) == (1280, 720) for p in pngs)  # Marp's slide size
    pdf = (out / "deck.pdf").read_bytes()
    assert len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf)) == 4
    assert b"https://example.org" in pdf  # the hyperlink is kept as a PDF link
    with zipfile.ZipFile(io.BytesIO((out / "site.zip").read_bytes())) as site:
        assert "presenter.html" in site.namelist()
        assert "Speaker note for the title slide." in site.read("presenter.html").decode()
    manifest = json.loads((out / "deckyard-manifest.json").read_text())
    listed = {f["path"] for f in manifest["files"]}
    assert listed == {"deck.pdf", "site.zip", *(f"pages/{p.name}" for p in pngs)}
    assert sorted(p.name for p in out.iterdir()) == [
        "deck.pdf",
        "deckyard-manifest.json",
        "pages",
        "site.zip",
    ]
    # the run's own database is gone; the migrated template it was copied from stays
    cache = tmp_path / "cache" / "deckyard"
    assert [p.name for p in cache.iterdir()] == [template_path(cache).name]

    # a shorter deck into the same folder leaves no stale slides behind
    (deck / "marp.md").write_text("# One\n\n---\n\n# Two\n")
    again = run(
        tmp_path, "render", str(deck / "marp.md"), "--out", str(out), "--format", "png", env=env
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(p.name for p in (out / "pages").iterdir()) == [
        "01-slide-01.png",
        "02-slide-02.png",
    ]
    assert not (out / "deck.pdf").exists()


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    missing = run(tmp_path, "validate", str(tmp_path / "nope"))
    assert missing.returncode == 2, missing.stdout + missing.stderr
    (tmp_path / "notes.txt").write_text("x")
    a_file = run(tmp_path, "validate", str(tmp_path / "notes.txt"))
    assert a_file.returncode == 2 and "is a file" in " ".join(a_file.stderr.split())
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    refused = run(tmp_path, "render", str(FIXTURES / "plain.md"), "--out", str(foreign))
    assert refused.returncode == 2
    assert "not written by deckyard" in " ".join(refused.stderr.split())
    assert (foreign / "keep.txt").read_text() == "mine"


MARP_FIXTURE = Path(__file__).parents[1] / "fixtures" / "marp_engine"
_SSIM_SIZE = (320, 180)


def _grey(path: Path) -> Image.Image:
    image = Image.open(path).convert("L")
    return image if image.size == _SSIM_SIZE else image.resize(_SSIM_SIZE, Image.Resampling.BOX)


def _ssim(a: Image.Image, b: Image.Image, window: int = 8) -> float:
    """Mean structural similarity of two greyscale images over `window`-pixel squares."""
    width, height = a.size
    left, right = a.tobytes(), b.tobytes()
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    scores = []
    for top in range(0, height - window + 1, window):
        for x0 in range(0, width - window + 1, window):
            rows = [(top + j) * width + x0 for j in range(window)]
            xs = [left[r + i] for r in rows for i in range(window)]
            ys = [right[r + i] for r in rows for i in range(window)]
            n = len(xs)
            mx, my = sum(xs) / n, sum(ys) / n
            vx = sum((v - mx) ** 2 for v in xs) / n
            vy = sum((v - my) ** 2 for v in ys) / n
            cov = sum((p - mx) * (q - my) for p, q in zip(xs, ys, strict=True)) / n
            scores.append(
                ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
            )
    return sum(scores) / len(scores)


def test_a_marp_deck_renders_as_marp_cli_renders_it(tmp_path: Path) -> None:
    """`marp-cli-N.png` are Marp CLI 4.5.1's PNGs of talk.md, greyscale at 320x180.

    Made with `CHROME_PATH=/usr/bin/chromium bench/marp/node_modules/.bin/marp --images png`
    (after `npm ci --prefix bench/marp`), offline: Marp CLI then misses KaTeX's fonts, which it
    loads from a CDN, so its slide 2 has fallback math where Deckyard has KaTeX's own fonts.
    """
    deck = tmp_path / "talk"
    shutil.copytree(MARP_FIXTURE, deck)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = tmp_path / "out"
    done = run(tmp_path, "render", str(deck / "talk.md"), "--out", str(out), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    pngs = sorted((out / "pages").glob("*.png"))
    assert [p.name for p in pngs] == ["01-slide-01.png", "02-slide-02.png"]
    assert all(png_size(p) == (1280, 720) for p in pngs)
    pdf = (out / "deck.pdf").read_bytes()
    assert len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf)) == 2
    fitted, maths = (
        _ssim(_grey(p), _grey(MARP_FIXTURE / f"marp-cli-{i}.png"))
        for i, p in enumerate(pngs, start=1)
    )
    assert fitted > 0.98, fitted  # the <!--fit--> title, gaia's colours and type
    assert maths > 0.9, maths  # the global <style>, line breaks; KaTeX's fonts differ
    assert _ssim(_grey(pngs[0]), _grey(MARP_FIXTURE / "marp-cli-2.png")) < 0.8  # a wrong slide
