"""Screenshots/s through the HTTP API against a warm plain Playwright loop (issue 12 target).

Both on the example deck's compiled pages (`examples/launch-deck`), alternated within one run,
median (min-max) of `--reps` repetitions:

- Deckyard: a Lite `deckyard serve` with one supervised renderer (default slots); `--shots`
  screenshots (render requests) submitted at once with `POST /v1/screenshots?dedupe=false`,
  each followed through its SSE stream and its PNG downloaded (`compare_render.pipeline`);
  one warm-up shot.
- Plain: one warm Chromium with as many tabs as the renderer has slots, `set_content` +
  `document.fonts.ready` + `screenshot` (`compare_render.plain_loop`).

The server starts once and stays warm across repetitions, as the plain browser does. Its one
workspace may use every slot (`--workspace-share 1`, as the plain loop uses every tab); the
server's default share (0.5, issue 30: a workspace keeps the other half free for the rest)
gives a lone workspace half the slots, which `--workspace-share 0.5` measures. Screenshots are
not audited (`audit` is off unless asked); `DECKYARD_RENDERER_SLOTS` sets the slots.

    .venv/bin/python bench/screenshot_rate.py --shots 24 --reps 3 [--workspace-share 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_render import Serve, deck_pages, pipeline, plain_loop


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=int, default=24)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--workspace-share",
        type=float,
        default=1.0,
        help="DECKYARD_RENDER_WORKSPACE_SLOT_SHARE of the server (its default is 0.5)",
    )
    args = parser.parse_args()
    os.environ["DECKYARD_RENDER_WORKSPACE_SLOT_SHARE"] = str(args.workspace_share)
    pages, problem = deck_pages()
    if problem is not None:
        raise SystemExit(problem)
    slots = int(os.environ.get("DECKYARD_RENDERER_SLOTS", "2"))
    serve = Serve(renderers=1)
    ours: list[float] = []
    plain: list[float] = []
    try:
        serve.wait_healthy()
        serve.wait_renderer()
        for _ in range(args.reps):
            ours.append(asyncio.run(pipeline(serve, pages, args.shots)))
            plain.append(asyncio.run(plain_loop(pages, args.shots, slots)))
    finally:
        serve.stop()
    ratio = [o / p for o, p in zip(ours, plain, strict=True)]
    print(
        f"{args.shots} PNG screenshots of the example deck's {len(pages)} pages, "
        f"{args.reps} repetitions, median (min-max):\n"
        f"  Deckyard HTTP API (1 renderer, {slots} slots, workspace share "
        f"{args.workspace_share:g}): {spread(ours)} screenshots/s\n"
        f"  plain warm Playwright loop ({slots} tabs):     {spread(plain)} screenshots/s\n"
        f"  ratio: {statistics.median(ratio):.0%} "
        f"({min(ratio):.0%}-{max(ratio):.0%}; target >= 95%)"
    )


if __name__ == "__main__":
    main()
