"""reveal.js HTML decks through `deckyard render`, in reveal.js's own order (issue 29, item 2).

reveal.js removes `data-visibility="hidden"` slides when it starts, so every later slide's index
moves up; it loads lazy media (`data-src`) and backgrounds only near the slide it shows. The
PNGs must be reveal.js's slides, each once, with their images, and the deck's entry file need
not be `index.html`.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from deckyard.cli.pipeline import usage_problem
from deckyard.cli.render import usage_problems
from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck_report
from deckyard.decks.errors import DeckSourceError
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from tests.e2e.conftest import DECKYARD, clean_env
from tests.helpers.reveal import MARKDOWN_FIXTURE, reveal_deck

ORANGE = (220, 80, 40)  # square.png


def far_slides(count: int) -> str:
    """Slides each with a lazy image, far beyond reveal.js's view distance from slide 1."""
    return "".join(
        f'<section><h2>Far {i}</h2><img data-src="square.png" width="100"></section>'
        for i in range(count)
    )


def deck(tmp_path: Path, entry: str = "index.html") -> Path:
    folder = reveal_deck(tmp_path / "talk")
    html = (folder / "index.html").read_text()
    html = html.replace(
        "<section><h1>reveal.js fixture</h1>",
        '<section data-visibility="hidden"><h1>Hidden</h1></section>'
        "<section><h1>reveal.js fixture</h1>",
    )
    html = html.replace(
        '<section data-background-color="#1d3557">',
        '<section data-background="square.png"><h2>Background</h2></section>'
        + far_slides(5)
        + '<section data-background-color="#1d3557">',
    )
    (folder / "index.html").unlink()
    (folder / entry).write_text(html)
    return folder


def orange_share(path: Path) -> float:
    image = Image.open(path).convert("RGB").resize((96, 70))
    pixels = list(image.get_flattened_data())
    near = [p for p in pixels if all(abs(p[i] - ORANGE[i]) <= 40 for i in range(3))]
    return len(near) / len(pixels)


@pytest.mark.chromium
@pytest.mark.processes
def test_hidden_slides_stacks_lazy_images_and_backgrounds_as_reveal_shows_them(
    tmp_path: Path,
) -> None:
    folder = deck(tmp_path, entry="demo.html")  # no index.html: the one reveal.js file is used
    out = tmp_path / "out"
    done = subprocess.run(
        [*DECKYARD, "render", str(folder), "--out", str(out), "--format", "png"],
        env=clean_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RENDER_IMAGE_BROKEN" not in done.stdout
    manifest = json.loads((out / "deckyard-manifest.json").read_text())
    pngs = [out / p["png"] for p in manifest["pages"]]
    # fixture, vertical one, vertical two, background, 5 far slides, coloured: the hidden one
    # is not a page, and no slide shows twice.
    assert len(pngs) == 10
    shares = [orange_share(p) for p in pngs]
    assert shares[0] == 0 and shares[1] == 0  # the title, then the first vertical slide
    assert 0.02 < shares[2] < 0.5  # the lazy image of "vertical two"
    assert shares[3] > 0.9  # data-background="square.png" covers the slide
    assert all(0.01 < s < 0.5 for s in shares[4:9])  # each far slide's lazy image
    assert shares[9] == 0


def test_a_folder_of_several_reveal_decks_without_index_html_names_them(tmp_path: Path) -> None:
    folder = deck(tmp_path, entry="demo.html")
    (folder / "other.html").write_text((folder / "demo.html").read_text())
    limits = DeckLimits.from_settings(Settings.load())
    with pytest.raises(DeckSourceError) as raised:
        load_deck_folder(folder, limits)
    assert "demo.html, other.html" in str(raised.value)
    assert str(folder / "demo.html") in str(raised.value)
    chosen = load_deck_folder(folder / "other.html", limits)  # naming the file chooses it
    assert len(chosen.pages) == 10
    # and `deckyard render talk/other.html` takes it (the CLI refused any file but .md)
    assert usage_problems(folder / "other.html", "png") == []
    assert usage_problem(folder / "other.html", {"png"}) is None
    (folder / "notes.txt").write_text("x")
    assert "is a file" in usage_problems(folder / "notes.txt", None)[0]


@pytest.mark.chromium
@pytest.mark.processes
def test_a_reveal_markdown_deck_renders_every_slide_through_the_markdown_plugin(
    tmp_path: Path,
) -> None:
    folder = reveal_deck(tmp_path / "md", MARKDOWN_FIXTURE)
    out = tmp_path / "out"
    # Each page of a reveal.js deck holds the whole deck (~0.8 MB here): the site's browser
    # check sends the index and its first page only, not all eight (over this limit).
    limit = {"DECKYARD_RENDERER_MAX_DOCUMENT_BYTES": str(3 * 1024 * 1024)}
    done = subprocess.run(
        [*DECKYARD, "render", str(folder), "--out", str(out), "--format", "png,pdf,zip"],
        env=clean_env(tmp_path, **limit),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((out / "deckyard-manifest.json").read_text())
    assert [p["status"] for p in manifest["pages"]] == ["passed"] * 8
    assert (out / "deck.pdf").is_file() and (out / "site.zip").is_file()
    # Each PNG is a different slide (the plugin rendered each piece), none blank.
    digests = {hashlib.sha256((out / p["png"]).read_bytes()).hexdigest() for p in manifest["pages"]}
    assert len(digests) == 8


def test_a_deck_in_a_subfolder_of_reveals_repository_loads_dist_from_above(tmp_path: Path) -> None:
    """reveal.js's own `examples/markdown.html` loads `../dist/`; rendering that file (as
    `deckyard render reveal.js/examples/markdown.html`) failed every slide on those references."""
    root = reveal_deck(tmp_path / "reveal.js", MARKDOWN_FIXTURE)
    examples = root / "examples"
    examples.mkdir()
    html = (root / "index.html").read_text().replace('"dist/', '"../dist/')
    (examples / "markdown.html").write_text(html)
    (root / "example.md").rename(examples / "example.md")
    (root / "square.png").rename(examples / "square.png")
    limits = DeckLimits.from_settings(Settings.load())
    source = load_deck_folder(examples / "markdown.html", limits)
    report = compile_deck_report(source, limits)
    assert report.problems == []
    assert len(source.pages) == 8  # as the same deck at the root gives
