"""`deckyard render` run again after an edit: the render cache's incremental runs (issue 31).

On the generated deck of `marp_deck.py` (`--slides`, 100 by default), each repetition, with an
empty render cache of its own (`XDG_CACHE_HOME` in a temporary folder):

- `first`: `deckyard render DECK --out OUT --format png,pdf`, nothing kept yet;
- `one changed`: the same after one slide's heading changed (that page and the PDF of the
  whole deck are rendered, the other pages come from the cache);
- `unchanged`: the same deck once more (nothing rendered).

Each run must write every PNG and the PDF. Reported: median (min-max) wall seconds of each, and
the ratio of the second and third run to the first (the target: one changed of 100 <= 0.15x).

    .venv/bin/python bench/render_cache.py [--slides 100] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from marp_deck import write_decks

ROOT = Path(__file__).resolve().parent.parent
DECKYARD = str(ROOT / ".venv" / "bin" / "deckyard")
REUSED = re.compile(r"render cache: (\d+) of (\d+) renders reused")


def run(deck: Path, out: Path, cache: Path, slides: int) -> tuple[float, str]:
    """Wall seconds of one render and its cache line; raises when it fails."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.perf_counter()
    done = subprocess.run(
        [DECKYARD, "render", str(deck), "--out", str(out), "--format", "png,pdf"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"deckyard render failed ({done.returncode}):\n{done.stdout[-2000:]}")
    pngs = len(list((out / "pages").glob("*.png")))
    if pngs != slides or not (out / "deck.pdf").is_file():
        raise SystemExit(f"{pngs} PNGs of {slides}, or no PDF, in {out}")
    found = REUSED.search(done.stdout)
    return seconds, f"{found.group(1)} of {found.group(2)} reused" if found else "no cache"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"first": [], "one changed": [], "unchanged": []}
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="deckyard-render-cache-") as tmp:
        root = Path(tmp)
        for rep in range(args.reps):
            decks = write_decks(args.slides, root / f"decks-{rep}")
            deck = decks.deckyard_folder
            cache = root / f"cache-{rep}"
            out = root / "out"
            for name in times:
                if name == "one changed":
                    page = sorted((deck / "pages").iterdir())[args.slides // 2]
                    text = page.read_text(encoding="utf-8")
                    page.write_text(text.replace("# ", "# Edited: ", 1), encoding="utf-8")
                seconds, note = run(deck, out, cache, args.slides)
                times[name].append(seconds)
                notes[name] = note
                print(f"rep {rep + 1} {name}: {seconds:.2f} s ({note})", flush=True)
    first = statistics.median(times["first"])
    print(f"\n`deckyard render --format png,pdf`, {args.slides} slides, {args.reps} reps:")
    for name, values in times.items():
        ratio = statistics.median(values) / first
        print(f"  {name:12} {spread(values)} s  {ratio:.2f}x of the first  ({notes[name]})")
    print("  target: one changed <= 0.15x of the first")


if __name__ == "__main__":
    main()
