"""`deckyard render --steps`: a PNG, a PDF page and a PPTX slide per step of each slide, as the
tool shows it."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pikepdf
import pytest
from pptx import Presentation

from tests.e2e.test_render_cli import png_size, run
from tests.helpers.reveal import reveal_deck

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

STEPS = Path(__file__).parents[1] / "fixtures" / "steps"


def _render_steps(tmp_path: Path, deck: Path) -> tuple[list[Path], int, list[int]]:
    out = tmp_path / "out"
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = run(tmp_path, "render", str(deck), "--out", str(out), "--steps", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    with pikepdf.open(out / "deck.pdf") as pdf:
        pages = len(pdf.pages)
        at = {page.obj.objgen: i for i, page in enumerate(pdf.pages)}
        with pdf.open_outline() as outline:
            starts = [at[item.destination[0].objgen] for item in outline.root]
    return sorted((out / "pages").glob("*.png")), pages, starts


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_slidev_deck_renders_a_page_per_click(tmp_path: Path) -> None:
    deck = tmp_path / "slides.md"
    shutil.copyfile(STEPS / "slidev.md", deck)
    pngs, pdf_pages, outline = _render_steps(tmp_path, deck)
    agenda = [f"02-slide-02.step-{k}.png" for k in range(1, 5)]
    assert [p.name for p in pngs] == [
        "01-slide-01.png",
        "02-slide-02.png",
        *agenda,
        "03-slide-03.png",
    ]
    assert pdf_pages == len(pngs) == 7
    steps = [p for p in pngs if p.name.startswith("02-")]
    assert len({_digest(p) for p in steps}) == len(steps) == 5
    # a bookmark per slide, on the page of its first step
    assert outline == [0, 1, 6]
    assert all(png_size(p) == png_size(pngs[0]) for p in pngs)


def test_a_reveal_deck_renders_a_page_per_fragment_step(tmp_path: Path) -> None:
    deck = reveal_deck(tmp_path / "talk", STEPS / "reveal")
    pngs, pdf_pages, _outline = _render_steps(tmp_path, deck)
    agenda = [f"02-slide-02.step-{k}.png" for k in range(1, 4)]
    assert [p.name for p in pngs] == [
        "01-slide-01.png",
        "02-slide-02.png",
        *agenda,
        "03-slide-03.png",
    ]
    # reveal.js's own print view, fragments on pages of their own, has as many pages
    assert pdf_pages == len(pngs) == 6
    steps = [p for p in pngs if p.name.startswith("02-")]
    assert len({_digest(p) for p in steps}) == len(steps) == 4


def _slide_text(slide: Any) -> str:
    return " ".join(
        shape.text_frame.text for shape in slide.shapes if getattr(shape, "has_text_frame", False)
    )


def test_a_marp_deck_exports_an_editable_pptx_slide_per_fragment_step(tmp_path: Path) -> None:
    deck = tmp_path / "slides.md"
    # the slides inside Marp's SVG wrapper, and their page numbers (Marp's generated content),
    # are text the PPTX can hold
    shutil.copyfile(STEPS / "marp.md", deck)
    out = tmp_path / "out"
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ("render", str(deck), "--out", str(out), "--format", "pptx", "--steps")
    done = run(tmp_path, *args, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pptx: 6 editable slides, 0 as pictures" in done.stdout, done.stdout
    slides = list(Presentation(str(out / "deck.pptx")).slides)
    # the agenda's three fragmented items: step 0 (none shown) to step 3 (all shown)
    assert len(slides) == 1 + 4 + 1
    agenda = [_slide_text(slide) for slide in slides[1:5]]
    shown = [[item in text for item in ("First", "Second", "Third")] for text in agenda]
    assert shown == [
        [False, False, False],
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ], agenda
    assert all("Agenda" in text for text in agenda)
    # the page number counts slides: 2 on every step of the agenda
    numbers = [
        {shape.text_frame.text for shape in slide.shapes if shape.has_text_frame} & set("123")
        for slide in slides
    ]
    assert numbers == [{"1"}, {"2"}, {"2"}, {"2"}, {"2"}, {"3"}], numbers
