"""Warm latency of one page validation through `POST /v1/validate` (issue 12 target).

A Lite `deckyard serve` with one supervised renderer; each request is a one-page deck ZIP made
from an example deck page (`examples/launch-deck`, with its theme, fonts and images), so the
page compiles and renders as it does in the deck. Untimed warm-up rounds first, then requests
one at a time, cycling through the pages; p50 / p95 / max of the wall time per request.

    .venv/bin/python bench/validate_latency.py --requests 60
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
import tomllib
import zipfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_render import Serve

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "launch-deck"


def page_zips() -> dict[str, bytes]:
    """One deck ZIP per example page: that page, the theme and every asset."""
    manifest = tomllib.loads((EXAMPLE / "deck.toml").read_text(encoding="utf-8"))
    text = (EXAMPLE / "deck.toml").read_text(encoding="utf-8")
    head, _pages, tail = text.partition("pages = [")
    tail = tail.split("]", 1)[1]
    out: dict[str, bytes] = {}
    for page in manifest["pages"]:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as archive:
            archive.writestr("deck.toml", f'{head}pages = ["{page}"]{tail}')
            for path in sorted(EXAMPLE.rglob("*")):
                rel = path.relative_to(EXAMPLE).as_posix()
                if path.is_file() and rel != "deck.toml" and not rel.startswith("pages/"):
                    archive.write(path, rel)
            archive.write(EXAMPLE / "pages" / page, f"pages/{page}")
        out[page] = buf.getvalue()
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--warmup-rounds", type=int, default=2)
    args = parser.parse_args()
    zips = page_zips()
    serve = Serve(renderers=1)
    try:
        serve.wait_healthy()
        serve.wait_renderer()
        headers = {"Authorization": f"Bearer {serve.token}", "Content-Type": "application/zip"}
        with httpx.Client(base_url=serve.url, headers=headers, timeout=120) as client:
            names = list(zips)
            for _ in range(args.warmup_rounds):
                for name in names:
                    client.post("/v1/validate", content=zips[name])
            seconds: list[float] = []
            statuses: dict[str, int] = {}
            for i in range(args.requests):
                name = names[i % len(names)]
                t0 = time.perf_counter()
                answer = client.post("/v1/validate", content=zips[name])
                seconds.append(time.perf_counter() - t0)
                key = f"{answer.status_code} {answer.json().get('status')}"
                statuses[key] = statuses.get(key, 0) + 1
        ms = [s * 1000 for s in seconds]
        print(
            f"POST /v1/validate, one example page per request, {args.requests} warm requests: "
            f"p50 {percentile(ms, 50):.0f} ms, p95 {percentile(ms, 95):.0f} ms, "
            f"max {max(ms):.0f} ms, mean {statistics.mean(ms):.0f} ms; answers {statuses}"
        )
    finally:
        serve.stop()


if __name__ == "__main__":
    main()
