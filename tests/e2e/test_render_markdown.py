"""`deckyard render talk.md`: a one-file Markdown deck end to end, and a clean output folder."""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

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
    assert "warning: marp.md:54 (slide 4)" in done.stdout.replace("\n", " ")
    pngs = sorted((out / "pages").glob("*.png"))
    assert [p.name for p in pngs] == [f"0{i}-slide-0{i}.png" for i in range(1, 5)]
    assert all(png_size(p) == (1920, 1080) for p in pngs)
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
