"""Benchmark: screenshots per second through the renderer API vs a plain warm Playwright loop.

Renders a 1920x1080 slide (one flat, one with a gradient and text) as PNG, first with a plain
Playwright loop (one warm browser, N pages, `set_content` + `screenshot`), then through a real
`deckyard renderer --slots N` subprocess (`POST /v1/render`, N concurrent clients), for N = 1
and 2, in the same run. Prints a table with the ratio; the goal is at least 90%.

Usage: `.venv/bin/python bench/render.py [--count 40]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.async_api import async_playwright

from deckyard.render.signing import HmacAuth

SECRET = "bench-secret-0123456789abcdef"
DECKYARD = str(Path(sys.executable).with_name("deckyard"))
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


async def plain_loop(html: str, pages: int, count: int) -> float:
    """Screenshots per second of a warm browser with `pages` pages working in parallel."""
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path="/usr/bin/chromium", chromium_sandbox=os.geteuid() != 0
        )
        context = await browser.new_context(viewport={"width": 1920, "height": 1080})
        workers = [await context.new_page() for _ in range(pages)]
        for page in workers:
            await page.set_content(html)
            await page.screenshot(type="png")
        remaining = count

        async def work(page: object) -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await page.set_content(html)  # type: ignore[attr-defined]
                await page.evaluate("document.fonts.ready.then(() => true)")  # type: ignore[attr-defined]
                await page.screenshot(type="png")  # type: ignore[attr-defined]

        started = time.monotonic()
        await asyncio.gather(*(work(p) for p in workers))
        elapsed = time.monotonic() - started
        await browser.close()
    return count / elapsed


async def through_api(url: str, html: str, slots: int, count: int) -> float:
    """Screenshots per second through `POST /v1/render` with `slots` concurrent clients."""
    async with httpx.AsyncClient(base_url=url, auth=HmacAuth(SECRET), timeout=60) as client:
        body = {"document": html, "width": 1920, "height": 1080}
        for _ in range(slots):
            (await client.post("/v1/render", json=body)).raise_for_status()
        remaining = count

        async def work() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                response = await client.post("/v1/render", json=body)
                response.raise_for_status()

        started = time.monotonic()
        await asyncio.gather(*(work() for _ in range(slots)))
        return count / (time.monotonic() - started)


def start_renderer(slots: int, tmp: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start a renderer subprocess and return it with its URL."""
    env = {
        **os.environ,
        "DECKYARD_RENDERER_SECRET": SECRET,
        "DECKYARD_RENDERER_TMP_DIR": tmp,
        "DECKYARD_RENDERER_RECYCLE_AFTER_RENDERS": "100000",
    }
    proc = subprocess.Popen(
        [DECKYARD, "renderer", "--port", "0", "--slots", str(slots)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdout is not None
    select.select([proc.stdout], [], [], 60)
    return proc, json.loads(proc.stdout.readline())["url"]


def main() -> None:
    """Run every combination and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40, help="screenshots per measurement")
    args = parser.parse_args()
    rows = []
    for slots in (1, 2):
        plain = {
            name: asyncio.run(plain_loop(html, slots, args.count)) for name, html in SLIDES.items()
        }
        with tempfile.TemporaryDirectory(prefix="dyb-") as tmp:
            proc, url = start_renderer(slots, tmp)
            try:
                api = {
                    name: asyncio.run(through_api(url, html, slots, args.count))
                    for name, html in SLIDES.items()
                }
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
                if proc.stdout is not None:
                    proc.stdout.close()
        for name in SLIDES:
            rows.append((name, slots, plain[name], api[name], api[name] / plain[name]))
    print(f"{'slide':15} {'slots':>5} {'plain/s':>9} {'renderer/s':>11} {'ratio':>7}")
    for name, slots, plain_rate, api_rate, ratio in rows:
        print(f"{name:15} {slots:>5} {plain_rate:>9.2f} {api_rate:>11.2f} {ratio:>7.0%}")


if __name__ == "__main__":
    main()
