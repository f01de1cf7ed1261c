"""PPTX export against PDF export of the 100-slide bench deck (issue 32, item 1: <= 1.5x).

The deck is `bench/marp_deck.py`'s Deckyard folder (1280x720; a heading and a bullet list with
inline code, CJK and emoji on each slide, every fourth adding an image, a table, code or a
quote). Three runs of `deckyard render DECK --out OUT` alternate within each repetition, each
in a fresh output folder: `--format png` (validation and PNGs only: the baseline every run
shares), `--format pdf` and `--format pptx`. Reported: median (min-max) wall seconds of each,
the end-to-end ratio pptx/pdf, and the ratio of what the export adds over the baseline
(pptx - png) / (pdf - png), the export job on its own.

    bench/pptx_vs_pdf [--slides 100] [--reps 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from marp_deck import write_decks

ROOT = Path(__file__).resolve().parents[1]
DECKYARD = str(ROOT / ".venv" / "bin" / "deckyard")
VARIANTS = ("png", "pdf", "pptx")
OUTPUT = {"png": None, "pdf": "deck.pdf", "pptx": "deck.pptx"}


def run_once(deck: Path, out: Path, fmt: str) -> float:
    """Wall seconds of one `deckyard render --format fmt`; raises when it fails."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    done = subprocess.run(
        [DECKYARD, "render", str(deck), "--out", str(out), "--format", fmt, "--no-cache"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ},
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{fmt}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    name = OUTPUT[fmt]
    if name is not None and not (out / name).is_file():
        raise SystemExit(f"{fmt}: no {name} written")
    return wall


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    started = dt.datetime.now(dt.UTC)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="pptx-bench-") as tmp:
        root = Path(tmp)
        decks = write_decks(args.slides, root / "decks")
        run_once(decks.deckyard_folder, root / "warm", "png")  # caches, migrated template
        slides: list[dict[str, str]] = []
        for rep in range(args.reps):
            order = VARIANTS if rep % 2 == 0 else tuple(reversed(VARIANTS))
            for fmt in order:
                out = root / f"out-{fmt}"
                times[fmt].append(run_once(decks.deckyard_folder, out, fmt))
                if fmt == "pptx":
                    manifest = json.loads((out / "deckyard-manifest.json").read_text())
                    slides = [p["pptx"] for p in manifest["pages"] if "pptx" in p]
            print(f"rep {rep + 1}: " + ", ".join(f"{f} {times[f][-1]:.1f} s" for f in VARIANTS))
    med = {f: statistics.median(times[f]) for f in VARIANTS}
    pairs = [p / d for p, d in zip(times["pptx"], times["pdf"], strict=True)]
    # what each export adds over the baseline run; a pair whose PDF run was not slower than its
    # baseline (noise on a loaded machine) has no meaningful ratio and is left out
    added = [
        (x - b) / (d - b)
        for x, d, b in zip(times["pptx"], times["pdf"], times["png"], strict=True)
        if d - b > 0.5
    ]
    editable = sum(1 for s in slides if s.get("mode") == "editable")
    print()
    print(f"`{os.environ.get('BENCH_COMMAND', 'bench/pptx_vs_pdf')}`, {started:%Y-%m-%d %H:%M} UTC")
    print(f"{args.slides} slides, {args.reps} repetitions, alternating; wall seconds")
    print()
    print("| run | wall s, median (min-max) |")
    print("|---|---|")
    for fmt in VARIANTS:
        print(f"| `--format {fmt}` | {spread(times[fmt])} |")
    print()
    print(
        f"end to end pptx/pdf: {statistics.median(pairs):.2f}x (pairs: "
        + ", ".join(f"{r:.2f}" for r in pairs)
        + ")"
    )
    print(
        f"export alone (minus the png run): {statistics.median(added or [math.nan]):.2f}x (pairs: "
        + ", ".join(f"{r:.2f}" for r in added)
        + ")"
    )
    print(
        f"pdf export alone {med['pdf'] - med['png']:.1f} s, "
        f"pptx export alone {med['pptx'] - med['png']:.1f} s"
    )
    print(f"slides: {editable} editable, {len(slides) - editable} pictures")


if __name__ == "__main__":
    main()
