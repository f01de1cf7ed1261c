"""What one document per deck would cost: the sizing for the render model after issue 31.

`deckyard render` visits every page as a document of its own (load, settle, capture, audit:
~100 ms of slot time a page). Marp CLI loads one document and screenshots it slide by slide.
This measures that second way on Deckyard's own compiled deck, beside the real thing, in one run:

- `deckyard render DECK --out OUT --format png,pdf --no-cache` (wall time);
- one Chromium (the renderer's launch flags), the deck's print document (every slide, as the
  PDF prints it) loaded once into each of `--tabs` tabs of the slide size (2: the renderer's
  slots), each tab capturing its share of the slides by their boxes
  (`Page.captureScreenshot` with a clip, PNG `optimizeForSpeed`, as the renderer does), then
  axe-core's rules (the renderer's `AXE_RULES`, in its isolated world) once over the document.

It then compares every slide's PNG with the one `deckyard render` wrote (greyscale, pixels that
differ by more than 30 of 255): the prototype only counts if the pictures are the same. Nothing
here is a feature: per-slide diagnostics (overflow, glyphs, console errors) and the PDF from the
same load are not built, and the timing leaves them out.

    .venv/bin/python bench/one_document.py [--slides 100] [--reps 3] [--tabs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageChops
from playwright.async_api import CDPSession, Page, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from marp_deck import write_decks
from render_cache import spread

from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_print_document
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from deckyard.render.renderer.browser import audit
from deckyard.render.renderer.browser.pool import CLOSED_NETWORK_ARGS

ROOT = Path(__file__).resolve().parent.parent
DECKYARD = str(ROOT / ".venv" / "bin" / "deckyard")
CHROME = "/usr/bin/chromium"
SLIDES = "Array.from(document.querySelectorAll('div.slide[data-number]')).map((e) => {"
SLIDES += " const r = e.getBoundingClientRect();"
SLIDES += " return [r.x + scrollX, r.y + scrollY, r.width, r.height]; })"


def render_per_page(deck: Path, out: Path) -> float:
    """Wall seconds of `deckyard render` (every page a visit of its own)."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "DECKYARD_CHROMIUM_PATH": CHROME}
    cmd = [DECKYARD, "render", str(deck), "--out", str(out), "--format", "png,pdf", "--no-cache"]
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"deckyard render failed ({done.returncode}):\n{done.stdout[-2000:]}")
    return time.perf_counter() - started


async def _capture(
    page: Page, cdp: CDPSession, boxes: list[list[float]], first: int, out: Path
) -> None:
    for number, (x, y, w, h) in enumerate(boxes, start=first):
        clip = {"x": x, "y": y, "width": w, "height": h, "scale": 1}
        shot = await cdp.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "optimizeForSpeed": True,
                "captureBeyondViewport": True,
                "clip": clip,
            },
        )
        (out / f"{number:03d}.png").write_bytes(base64.b64decode(shot["data"]))


async def one_document(document: str, out: Path, tabs: int) -> dict[str, float]:
    """Seconds of each phase of the one-document way; the slides' PNGs written to `out` (an
    existing folder). With `tabs` > 1 each tab loads the document and captures its share of
    the slides, side by side."""
    times: dict[str, float] = {}
    started = time.perf_counter()
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROME, args=list(CLOSED_NETWORK_ARGS))
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 720})
            pages = [await context.new_page() for _ in range(tabs)]
            sessions = [await context.new_cdp_session(page) for page in pages]
            await audit.install_axe(sessions[0])
            times["launch"] = time.perf_counter() - started
            mark = time.perf_counter()
            for page in pages:
                await page.set_content(document, wait_until="load")
                await page.evaluate("document.fonts.ready.then(() => true)")
            times["load"] = time.perf_counter() - mark
            mark = time.perf_counter()
            boxes = await pages[0].evaluate(SLIDES)
            share = -(-len(boxes) // tabs)
            await asyncio.gather(
                *(
                    _capture(page, cdp, boxes[i * share : (i + 1) * share], i * share + 1, out)
                    for i, (page, cdp) in enumerate(zip(pages, sessions, strict=True))
                )
            )
            times["captures"] = time.perf_counter() - mark
            mark = time.perf_counter()
            await audit.run_axe(sessions[0], await audit._audit_world(sessions[0]))
            times["axe"] = time.perf_counter() - mark
        finally:
            await browser.close()
    times["total"] = time.perf_counter() - started
    return times


def differing_slides(mine: Path, theirs: Path, slides: int) -> list[int]:
    """The slides whose two PNGs differ by more than 30 of 255 anywhere (greyscale)."""
    found = []
    for number in range(1, slides + 1):
        a = Image.open(mine / f"{number:03d}.png").convert("L")
        b = Image.open(theirs / f"{number:03d}-slide.png").convert("L")
        if a.size != b.size:
            found.append(number)
            continue
        diff = ImageChops.difference(a, b).point(lambda v: 255 if v > 30 else 0)
        if diff.histogram()[255]:
            found.append(number)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tabs", type=int, default=2, help="tabs capturing side by side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="deckyard-onedoc-") as tmp:
        work = Path(tmp)
        decks = write_decks(args.slides, work / "decks")
        limits = DeckLimits.from_settings(Settings())
        document = compile_print_document(load_deck_folder(decks.deckyard_folder, limits), limits)
        per_page: list[float] = []
        phases: dict[str, list[float]] = {}
        differing: list[int] = []
        for rep in range(args.reps):
            order = ["per-page", "one-document"] if rep % 2 == 0 else ["one-document", "per-page"]
            for way in order:
                if way == "per-page":
                    per_page.append(render_per_page(decks.deckyard_folder, work / "per-page"))
                else:
                    shutil.rmtree(work / "one", ignore_errors=True)
                    (work / "one").mkdir()
                    for name, value in asyncio.run(
                        one_document(document, work / "one", args.tabs)
                    ).items():
                        phases.setdefault(name, []).append(value)
            differing = differing_slides(work / "one", work / "per-page" / "pages", args.slides)
            print(
                f"rep {rep}: per-page {per_page[-1]:.2f} s, one document "
                f"{phases['total'][-1]:.2f} s, {len(differing)} slides differ",
                flush=True,
            )
    print(
        f"\n{args.slides} slides, {args.reps} reps, {args.tabs} tab(s), seconds, median (min-max):"
    )
    print(f"  deckyard render (validate, PNG, PDF)    {spread(per_page)}")
    print(
        f"  one document: launch {spread(phases['launch'])}, load {spread(phases['load'])}, "
        f"captures {spread(phases['captures'])}, one axe run {spread(phases['axe'])}, "
        f"total {spread(phases['total'])}"
    )
    print(f"  slides whose PNG differs from deckyard render's: {differing or 'none'}")


if __name__ == "__main__":
    main()
