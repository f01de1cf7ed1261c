"""Benchmark: screenshots per second through the renderer API vs a plain warm Playwright loop.

Renders a 1920x1080 slide (one flat, one with a gradient and text) as PNG two ways, for N = 1
and 2: a plain Playwright loop (one warm browser with Playwright's default flags, N pages,
`set_content` + `document.fonts.ready` + `screenshot`), and a real `deckyard renderer --slots N`
subprocess with default settings (`POST /v1/render`, N concurrent signed clients). Both run in
the same process and the same event loop; both get the same warm-up renders, which are not
timed; the measurement is split into `--rounds` rounds that alternate which side goes first, so
drift in the machine's load hits both sides alike. Prints a table with the ratio; the goal is at
least 90%.

Usage: `.venv/bin/python bench/render.py [--count 40] [--rounds 4] [--warmup 3]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from playwright.async_api import Browser, Page, async_playwright

from deckyard.render.protocol import HmacAuth

SECRET = "bench-secret-0123456789abcdef"
DECKYARD = str(Path(sys.executable).with_name("deckyard"))
CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1920, 1080
SLIDES = {
    "flat": "<html><body style='margin:0;background:#1d3557'></body></html>",
    "gradient+text": (
        "<html><body style='margin:0;width:1920px;height:1080px;"
        "background:linear-gradient(135deg,#e63946,#f1faee 50%,#457b9d);font-family:sans-serif'>"
        "<h1 style='font-size:120px;margin:0;padding:160px 120px 40px'>Quarterly review</h1>"
        "<ul style='font-size:56px;padding-left:180px'><li>Revenue up 12% · 收入增长</li>"
        "<li>Churn down to 2.1%</li><li>Three new regions</li></ul></body></html>"
    ),
}


async def concurrently(workers: int, count: int, one: Callable[[int], Awaitable[None]]) -> float:
    """Seconds for `workers` loops to do `count` renders between them; worker i calls one(i)."""
    remaining = count

    async def loop(index: int) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await one(index)

    started = time.monotonic()
    await asyncio.gather(*(loop(i) for i in range(workers)))
    return time.monotonic() - started


class PlainLoop:
    """The baseline: one warm browser, `pages` reused pages, nothing between renders."""

    def __init__(self, browser: Browser, pages: list[Page]) -> None:
        self.browser = browser
        self.pages = pages

    @classmethod
    async def start(cls, browser: Browser, pages: int) -> PlainLoop:
        context = await browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
        return cls(browser, [await context.new_page() for _ in range(pages)])

    async def render(self, index: int, html: str) -> None:
        page = self.pages[index]
        await page.set_content(html)
        await page.evaluate("document.fonts.ready.then(() => true)")
        await page.screenshot(type="png")

    async def run(self, html: str, count: int) -> float:
        return await concurrently(len(self.pages), count, lambda i: self.render(i, html))


class ThroughApi:
    """The renderer: `slots` concurrent clients posting to `/v1/render`."""

    def __init__(self, client: httpx.AsyncClient, slots: int) -> None:
        self.client = client
        self.slots = slots

    async def render(self, _index: int, html: str) -> None:
        body = {"document": html, "width": WIDTH, "height": HEIGHT}
        response = await self.client.post("/v1/render", json=body)
        response.raise_for_status()

    async def run(self, html: str, count: int) -> float:
        return await concurrently(self.slots, count, lambda i: self.render(i, html))


def start_renderer(slots: int, tmp: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start a renderer subprocess with default settings and return it with its URL."""
    env = {**os.environ, "DECKYARD_RENDERER_SECRET": SECRET, "DECKYARD_RENDERER_TMP_DIR": tmp}
    proc = subprocess.Popen(
        [DECKYARD, "renderer", "--port", "0", "--slots", str(slots)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdout is not None
    select.select([proc.stdout], [], [], 60)
    return proc, json.loads(proc.stdout.readline())["url"]


async def measure(slots: int, args: argparse.Namespace) -> list[tuple[str, int, float, float]]:
    """Plain and API rates per slide for one slot count, alternating rounds."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="dyb-") as tmp:
        proc, url = start_renderer(slots, tmp)
        try:
            async with (
                async_playwright() as pw,
                httpx.AsyncClient(base_url=url, auth=HmacAuth(SECRET), timeout=60) as client,
            ):
                browser = await pw.chromium.launch(
                    executable_path=CHROMIUM, chromium_sandbox=os.geteuid() != 0
                )
                plain = await PlainLoop.start(browser, slots)
                api = ThroughApi(client, slots)
                for name, html in SLIDES.items():
                    await plain.run(html, args.warmup * slots)
                    await api.run(html, args.warmup * slots)
                    spent = {"plain": 0.0, "api": 0.0}
                    per_round = max(1, args.count // args.rounds)
                    for round_no in range(args.rounds):
                        order = ["plain", "api"] if round_no % 2 == 0 else ["api", "plain"]
                        for label in order:
                            runner = plain if label == "plain" else api
                            spent[label] += await runner.run(html, per_round)
                    done = per_round * args.rounds
                    rows.append((name, slots, done / spent["plain"], done / spent["api"]))
                await browser.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()
    return rows


def main() -> None:
    """Run every combination and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=40, help="timed screenshots per side")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds per slide")
    parser.add_argument("--warmup", type=int, default=3, help="untimed renders per worker")
    args = parser.parse_args()
    rows = []
    for slots in (1, 2):
        rows.extend(asyncio.run(measure(slots, args)))
    print(f"# {platform.node()} {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'slide':15} {'slots':>5} {'plain/s':>9} {'renderer/s':>11} {'ratio':>7}")
    for name, slots, plain_rate, api_rate in rows:
        ratio = api_rate / plain_rate
        print(f"{name:15} {slots:>5} {plain_rate:>9.2f} {api_rate:>11.2f} {ratio:>7.0%}")


if __name__ == "__main__":
    main()
