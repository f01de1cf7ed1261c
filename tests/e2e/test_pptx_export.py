"""`deckyard render --format pptx`: editable slides where the page allows, pictures elsewhere.

The PPTX is opened with python-pptx, and converted back to PDF with LibreOffice (Debian's
`libreoffice-impress`, and poppler's `pdftoppm`/`pdftotext`, which `scripts/setup --dev`
installs) to compare each page with the PNG the renderer made of that slide.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from PIL import Image, ImageChops, ImageStat
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.oxml.ns import qn
from pptx.presentation import Presentation as PresentationType
from pptx.util import Emu

from tests.e2e.conftest import DECKYARD, clean_env

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

MANIFEST = """title = "Export Deck"
author = "Ada Lovelace"

[slide]
width = 800
height = 450
"""
PAGES = {
    "01-title.md": "# Quarterly review\n\nNumbers, plans and a few pictures.\n\n"
    "<!-- Welcome everyone and introduce the agenda. -->\n",
    "02-list.md": "## Plans\n\n- Ship the **editable** export\n- Keep the *PDF* as it is\n"
    "  - nested point\n- Measure it\n\n1. first\n2. second\n",
    "03-table.md": "## Results\n\n| Region | Q1 | Q2 |\n|--------|----|----|\n"
    "| North  | 10 | 12 |\n| South  | 7  | 9  |\n",
    "04-image.md": "## A picture\n\n![a red square](assets/red.png)\n",
    "05-code.md": '## Code\n\n```python\ndef greet(name):\n    return f"hello {name}"\n```\n',
    "06-cjk.md": "## 日本語のスライド\n\nこれは東アジアのテキストです。\n",
    "07-svg.html": '<h2 style="transform: rotate(-3deg)">Tilted heading</h2>\n'
    '<svg width="200" height="100"><circle cx="50" cy="50" r="40" fill="steelblue"/>'
    '<text x="100" y="55">circle label</text></svg>\n',
}
EMU_PER_PX = 9525
SOFFICE_TIMEOUT = 90


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `deckyard render --format png,pptx` of the fixture deck; the output folder."""
    root = tmp_path_factory.mktemp("pptx")
    deck = root / "deck"
    (deck / "pages").mkdir(parents=True)
    (deck / "assets").mkdir()
    (deck / "deck.toml").write_text(MANIFEST)
    for name, text in PAGES.items():
        (deck / "pages" / name).write_text(text, encoding="utf-8")
    Image.new("RGB", (120, 80), (220, 30, 30)).save(deck / "assets" / "red.png")
    out = root / "out"
    done = subprocess.run(
        [*DECKYARD, "render", str(deck), "--out", str(out), "--format", "png,pptx"],
        env=clean_env(root),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    flat = " ".join(done.stdout.split())
    assert "pptx: 6 editable slides, 1 as pictures" in flat
    assert "pptx: 07-svg: picture, it paints what shapes cannot: a CSS transform" in flat
    return out


def texts(slide: object) -> list[str]:
    return [s.text_frame.text for s in slide.shapes if s.has_text_frame]  # type: ignore[attr-defined]


def open_pptx(out: Path) -> PresentationType:
    return Presentation(str(out / "deck.pptx"))


def test_each_page_is_a_slide_at_the_decks_size_with_editable_text(rendered: Path) -> None:
    deck = open_pptx(rendered)
    assert len(deck.slides) == len(PAGES)
    assert (deck.slide_width, deck.slide_height) == (Emu(800 * EMU_PER_PX), Emu(450 * EMU_PER_PX))
    title, listing, table, image, code, cjk, fallback = deck.slides
    assert texts(title) == ["Quarterly review", "Numbers, plans and a few pictures."]
    assert title.notes_slide.notes_text_frame.text == "Welcome everyone and introduce the agenda."
    assert not listing.has_notes_slide or listing.notes_slide.notes_text_frame.text == ""
    items = [s for s in listing.shapes if s.has_text_frame and s.text_frame.text == "nested point"]
    assert len(items) == 1
    assert items[0].text_frame.paragraphs[0]._p.find(f"{qn('a:pPr')}/{qn('a:buChar')}") is not None
    bold = [
        r
        for s in listing.shapes
        if s.has_text_frame
        for p in s.text_frame.paragraphs
        for r in p.runs
        if r.text == "editable"
    ]
    assert bold and bold[0].font.bold is True
    tables = [s for s in table.shapes if s.has_table]
    assert len(tables) == 1
    cells = [[c.text for c in row.cells] for row in tables[0].table.rows]
    assert cells == [["Region", "Q1", "Q2"], ["North", "10", "12"], ["South", "7", "9"]]
    pictures = [s for s in image.shapes if s.shape_type == MSO_SHAPE_TYPE.PICTURE]
    assert len(pictures) == 1 and pictures[0].width == Emu(120 * EMU_PER_PX)
    code_runs = [
        r
        for s in code.shapes
        if s.has_text_frame
        for p in s.text_frame.paragraphs
        for r in p.runs
        if "greet" in r.text
    ]
    assert code_runs and "Mono" in str(code_runs[0].font.name)
    assert "return" in " ".join(texts(code))
    cjk_runs = [
        r
        for s in cjk.shapes
        if s.has_text_frame
        for p in s.text_frame.paragraphs
        for r in p.runs
        if "東アジア" in r.text
    ]
    assert cjk_runs
    ea = cjk_runs[0]._r.find(f"{qn('a:rPr')}/{qn('a:ea')}")
    assert ea is not None and "CJK" in ea.get("typeface")
    assert any(s.shape_type == MSO_SHAPE_TYPE.PICTURE for s in fallback.shapes)


def test_a_slide_that_cannot_be_rebuilt_is_its_picture_with_its_text_kept(rendered: Path) -> None:
    fallback = open_pptx(rendered).slides[6]
    shapes = list(fallback.shapes)
    picture = shapes[-1]  # on top of the text layer
    assert picture.shape_type == MSO_SHAPE_TYPE.PICTURE
    assert (picture.left, picture.top) == (0, 0)
    assert (picture.width, picture.height) == (Emu(800 * EMU_PER_PX), Emu(450 * EMU_PER_PX))
    layer = " ".join(texts(fallback))
    assert "Tilted heading" in layer and "circle label" in layer
    alphas = fallback.shapes._spTree.findall(f".//{qn('a:srgbClr')}/{qn('a:alpha')}")
    assert alphas and all(int(a.get("val")) <= 1000 for a in alphas)  # at most 1% opaque
    manifest = json.loads((rendered / "deckyard-manifest.json").read_text())
    report = {p["name"]: p["pptx"] for p in manifest["pages"]}
    assert [report[name]["mode"] for name in sorted(report)] == ["editable"] * 6 + ["image"]
    assert "svg" in report["07-svg"]["why"] and "transform" in report["07-svg"]["why"]
    assert report["03-table"]["why"] == "only table, text"


def run_tool(args: list[str], cwd: Path) -> None:
    """Run a converter in its own session; on a timeout the whole session is killed."""
    with subprocess.Popen(
        args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=SOFFICE_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        assert proc.returncode == 0, output.decode(errors="replace")


def thumb(path: Path) -> Image.Image:
    with Image.open(path) as image:
        return image.convert("L").resize((160, 90), Image.Resampling.BOX)


def difference(a: Image.Image, b: Image.Image) -> float:
    """The mean absolute difference of two thumbnails, 0-255."""
    return float(ImageStat.Stat(ImageChops.difference(a, b)).mean[0])


def test_libreoffice_converts_it_back_to_pages_that_look_like_the_pngs(
    rendered: Path, tmp_path: Path
) -> None:
    profile = tmp_path / "lo-profile"
    run_tool(
        [
            "soffice",
            f"-env:UserInstallation=file://{profile}",
            "--headless",
            "--convert-to",
            "pdf",
            "--outdir",
            str(tmp_path),
            str(rendered / "deck.pptx"),
        ],
        tmp_path,
    )
    pdf = tmp_path / "deck.pdf"
    run_tool(["pdftoppm", "-r", "24", "-png", str(pdf), str(tmp_path / "page")], tmp_path)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) == len(PAGES)
    pngs = sorted((rendered / "pages").glob("*.png"))
    converted = [thumb(p) for p in pages]
    original = [thumb(p) for p in pngs]
    same = [difference(a, b) for a, b in zip(converted, original, strict=True)]
    assert max(same) < 6.0, same
    # the measure tells slides apart: each page is nearer its own PNG than the next slide's
    for n, page in enumerate(converted):
        other = original[(n + 1) % len(original)]
        assert difference(page, other) > same[n], (n, same[n], difference(page, other))
    run_tool(["pdftotext", "-f", "7", "-l", "7", str(pdf), str(tmp_path / "p7.txt")], tmp_path)
    text = (tmp_path / "p7.txt").read_text()
    assert "Tilted heading" in text and "circle label" in text
