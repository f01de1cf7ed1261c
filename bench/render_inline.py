"""One renderer lever in isolation: large `data:` fonts served by URL against parsed inline.

Two `deckyard renderer --slots 1` processes, one with the default
`renderer_inline_extract_min_bytes` (the example deck's 600 KiB display font is served from the
page's origin) and one with it set out of reach (the font is parsed out of the HTML, as before
issue 12); each example deck page is submitted to both in turn, one at a time, and the median of
the renderer's own phase timings (`diagnostics.timings`) is printed per variant. The first round
is a warm-up.

    .venv/bin/python bench/render_inline.py --rounds 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from compare_render import deck_pages  # noqa: E402
from tests.drills.support import RendererProcess  # noqa: E402

VARIANTS = {
    "served by URL (default)": {},
    "parsed inline": {"DECKYARD_RENDERER_INLINE_EXTRACT_MIN_BYTES": str(10**9)},
}
PHASES = ("navigate_ms", "settle_ms", "capture_ms", "total_ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    pages, problem = deck_pages()
    if problem is not None:
        raise SystemExit(problem)
    renderers = {
        name: RendererProcess(Path(tempfile.mkdtemp(prefix="dyri-")), env, slots=1)
        for name, env in VARIANTS.items()
    }
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in renderers}
    try:
        for round_ in range(args.rounds):
            for page in pages:
                for name, renderer in renderers.items():
                    key = f"ri-{round_}-{page.name}"
                    body = {
                        "attempt_id": key,
                        "document": page.html,
                        "width": page.width,
                        "height": page.height,
                    }
                    renderer.submit_one(body).raise_for_status()
                    receipt = renderer.wait_terminal(key)
                    page = (receipt["pages"] or [{}])[0]
                    if receipt["status"] != "succeeded" or page.get("status") != "succeeded":
                        raise SystemExit(f"{name}: {receipt}")
                    if round_:
                        seen[name].append(page["diagnostics"]["timings"])
    finally:
        for renderer in renderers.values():
            renderer.stop()
    print(f"example deck pages, {args.rounds - 1} timed rounds, median ms per render:")
    for name, timings in seen.items():
        cells = ", ".join(f"{p} {statistics.median(t[p] for t in timings):.0f}" for p in PHASES)
        print(f"  {name:24} {cells}")


if __name__ == "__main__":
    main()
